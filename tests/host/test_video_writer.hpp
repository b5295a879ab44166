// Test videos written with FFmpeg's encoders (the video-file suites): smooth
// source frames, and a writer for any muxer/encoder pair this FFmpeg has.
#pragma once

#include <doctest/doctest.h>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace host_test {

namespace fs = std::filesystem;

using Frames = std::vector<std::vector<uint8_t>>;  // RGB24, height x width x 3 each

// Smooth gradients (lossy codecs keep them well), different in every frame.
inline Frames source_frames(int count, int w, int h) {
  Frames frames;
  for (int i = 0; i < count; ++i) {
    std::vector<uint8_t> px(static_cast<size_t>(w * h * 3));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)
          px[static_cast<size_t>((y * w + x) * 3 + c)] =
              static_cast<uint8_t>(10 + (x * 100) / w + (y * 50) / h + c * 15 + i * 6);
    frames.push_back(std::move(px));
  }
  return frames;
}

struct Clip {
  const char* muxer;    // "matroska", "mp4", "webm"
  const char* encoder;  // "ffv1", "mpeg4", "libx264", "libvpx", "libvpx-vp9"
  AVPixelFormat pix_fmt;
  int fps = 10;
};

template <class T, void (*F)(T**)>
struct Freer {
  void operator()(T* p) const { F(&p); }
};

// Writes `frames` as a video; false (with a message) when this FFmpeg lacks
// the encoder. `audio`: a PCM track beside the video; `video` false: the
// audio track alone.
inline bool write_video(const fs::path& path, const Clip& clip, const Frames& frames, int w, int h,
                        bool video = true, bool audio = false, const char* movflags = nullptr) {
  av_log_set_level(AV_LOG_ERROR);  // the muxers' progress notes are noise here
  const AVCodec* codec = avcodec_find_encoder_by_name(clip.encoder);
  if (!codec) {
    MESSAGE("skipped: this FFmpeg has no '" << clip.encoder << "' encoder");
    return false;
  }
  AVFormatContext* oc_raw = nullptr;
  REQUIRE(avformat_alloc_output_context2(&oc_raw, nullptr, clip.muxer, path.c_str()) >= 0);
  std::unique_ptr<AVFormatContext, void (*)(AVFormatContext*)> oc(oc_raw, [](AVFormatContext* c) {
    if (c->pb) avio_closep(&c->pb);
    avformat_free_context(c);
  });
  std::unique_ptr<AVCodecContext, Freer<AVCodecContext, avcodec_free_context>> vctx, actx;
  AVStream* vst = nullptr;
  AVStream* ast = nullptr;
  if (video) {
    vctx.reset(avcodec_alloc_context3(codec));
    vctx->width = w;
    vctx->height = h;
    vctx->pix_fmt = clip.pix_fmt;
    vctx->time_base = AVRational{1, clip.fps};
    vctx->framerate = AVRational{clip.fps, 1};
    vctx->gop_size = 4;
    vctx->max_b_frames = 0;
    vctx->thread_count = 1;
    if (std::string(clip.encoder) == "libx264")
      av_opt_set(vctx->priv_data, "preset", "ultrafast", 0);
    if (std::string(clip.encoder).rfind("libvpx", 0) == 0) {
      av_opt_set(vctx->priv_data, "deadline", "realtime", 0);
      av_opt_set_int(vctx->priv_data, "cpu-used", 8, 0);
      vctx->bit_rate = 400000;
    }
    if (oc->oformat->flags & AVFMT_GLOBALHEADER) vctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    REQUIRE(avcodec_open2(vctx.get(), codec, nullptr) >= 0);
    vst = avformat_new_stream(oc.get(), nullptr);
    REQUIRE(avcodec_parameters_from_context(vst->codecpar, vctx.get()) >= 0);
    vst->time_base = vctx->time_base;
    vst->avg_frame_rate = vctx->framerate;
  }
  if (audio) {
    const AVCodec* pcm = avcodec_find_encoder(AV_CODEC_ID_PCM_S16LE);
    actx.reset(avcodec_alloc_context3(pcm));
    actx->sample_rate = 8000;
    actx->sample_fmt = AV_SAMPLE_FMT_S16;
    av_channel_layout_default(&actx->ch_layout, 1);
    actx->time_base = AVRational{1, 8000};
    REQUIRE(avcodec_open2(actx.get(), pcm, nullptr) >= 0);
    ast = avformat_new_stream(oc.get(), nullptr);
    REQUIRE(avcodec_parameters_from_context(ast->codecpar, actx.get()) >= 0);
    ast->time_base = actx->time_base;
  }
  REQUIRE(avio_open(&oc->pb, path.c_str(), AVIO_FLAG_WRITE) >= 0);
  AVDictionary* header_options = nullptr;
  if (movflags) av_dict_set(&header_options, "movflags", movflags, 0);
  const int header = avformat_write_header(oc.get(), &header_options);
  av_dict_free(&header_options);
  REQUIRE(header >= 0);
  std::unique_ptr<AVPacket, Freer<AVPacket, av_packet_free>> pkt(av_packet_alloc());
  auto write_packets = [&](AVCodecContext* ctx, AVStream* st) {
    while (avcodec_receive_packet(ctx, pkt.get()) >= 0) {
      av_packet_rescale_ts(pkt.get(), ctx->time_base, st->time_base);
      pkt->stream_index = st->index;
      REQUIRE(av_interleaved_write_frame(oc.get(), pkt.get()) >= 0);
    }
  };
  std::unique_ptr<AVFrame, Freer<AVFrame, av_frame_free>> frame(av_frame_alloc());
  if (audio) {
    for (int i = 0; i < 4; ++i) {
      av_frame_unref(frame.get());
      frame->format = AV_SAMPLE_FMT_S16;
      frame->nb_samples = 800;
      frame->sample_rate = 8000;
      REQUIRE(av_channel_layout_copy(&frame->ch_layout, &actx->ch_layout) == 0);
      REQUIRE(av_frame_get_buffer(frame.get(), 0) >= 0);
      std::memset(frame->data[0], 0, 1600);
      frame->pts = i * 800;
      REQUIRE(avcodec_send_frame(actx.get(), frame.get()) >= 0);
      write_packets(actx.get(), ast);
    }
    avcodec_send_frame(actx.get(), nullptr);
    write_packets(actx.get(), ast);
  }
  if (video) {
    SwsContext* sws = sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, clip.pix_fmt, SWS_BILINEAR,
                                     nullptr, nullptr, nullptr);
    REQUIRE(sws);
    for (size_t i = 0; i < frames.size(); ++i) {
      av_frame_unref(frame.get());
      frame->format = clip.pix_fmt;
      frame->width = w;
      frame->height = h;
      REQUIRE(av_frame_get_buffer(frame.get(), 0) >= 0);
      const uint8_t* src[1] = {frames[i].data()};
      const int stride[1] = {w * 3};
      sws_scale(sws, src, stride, 0, h, frame->data, frame->linesize);
      frame->pts = static_cast<int64_t>(i);
      REQUIRE(avcodec_send_frame(vctx.get(), frame.get()) >= 0);
      write_packets(vctx.get(), vst);
    }
    sws_freeContext(sws);
    avcodec_send_frame(vctx.get(), nullptr);
    write_packets(vctx.get(), vst);
  }
  REQUIRE(av_write_trailer(oc.get()) >= 0);
  return true;
}

}  // namespace host_test
