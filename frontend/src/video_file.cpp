#include "video_file.hpp"

#include "input_files.hpp"
#include "toml_util.hpp"

#include <encgraph/error.hpp>

#include "video_file_libs.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdarg>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

namespace encgraph::host {
namespace {

namespace fs = std::filesystem;

// FFmpeg's functions, loaded at the first video file (video_file_libs.hpp).
const FfmpegApi& ff() {
  return ffmpeg();
}

// Every FFmpeg object is owned by one of these, so that an exception on any
// path frees it (the sanitizer stage runs the host tests under ASan).
struct FormatClose {
  void operator()(AVFormatContext* c) const { ff().avformat_close_input(&c); }
};
struct CodecFree {
  void operator()(AVCodecContext* c) const { ff().avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { ff().av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { ff().av_packet_free(&p); }
};
struct SwsFree {
  void operator()(SwsContext* s) const { ff().sws_freeContext(s); }
};
struct DictFree {
  void operator()(AVDictionary* d) const { ff().av_dict_free(&d); }
};
using FormatPtr = std::unique_ptr<AVFormatContext, FormatClose>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecFree>;
using FramePtr = std::unique_ptr<AVFrame, FrameFree>;
using PacketPtr = std::unique_ptr<AVPacket, PacketFree>;
using SwsPtr = std::unique_ptr<SwsContext, SwsFree>;

// The demuxers a video file may be read with (MP4/MOV, Matroska/WebM): an
// image2, HLS or concat demuxer could make FFmpeg open other files or URLs.
constexpr const char* kDemuxers = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm";
constexpr const char* kFormatsFix = "name an MP4 (or MOV), MKV or WebM file";

std::string quoted(const fs::path& file) {
  return "video '" + printable(file.string()) + "'";
}

std::string av_error(int err) {
  std::array<char, AV_ERROR_MAX_STRING_SIZE> buf{};
  ff().av_strerror(err, buf.data(), buf.size());
  return buf.data();
}

[[noreturn]] void fail(const fs::path& file, const std::string& why) {
  throw Error(ErrorKind::Input, quoted(file) + " " + why);
}

void* checked_alloc(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}

// FFmpeg's error lines while this thread reads a file: a demuxer that meets
// a truncated block logs it and ends the stream as if it were complete (a
// Matroska file states no frame count to compare with).
thread_local std::string* t_demux_errors = nullptr;

void log_callback(void* avcl, int level, const char* fmt, va_list args) {
  if (level > AV_LOG_ERROR || !t_demux_errors || !t_demux_errors->empty()) return;
  std::array<char, 512> line{};
  int prefix = 0;
  ff().av_log_format_line2(avcl, level, fmt, args, line.data(), static_cast<int>(line.size()),
                           &prefix);
  std::string text = line.data();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  *t_demux_errors = text.empty() ? "an error" : printable(text);
}

// FFmpeg's own log lines would repeat (less clearly) what the errors say:
// they go to log_callback, which only records the demuxer's errors.
void quiet_ffmpeg() {
  static std::once_flag once;
  std::call_once(once, [] { ff().av_log_set_callback(log_callback); });
}

// Records FFmpeg's first error line on this thread while alive.
class DemuxErrors {
 public:
  DemuxErrors() { t_demux_errors = &first_; }
  ~DemuxErrors() { t_demux_errors = nullptr; }
  DemuxErrors(const DemuxErrors&) = delete;
  DemuxErrors& operator=(const DemuxErrors&) = delete;
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// An opened file with its video stream and a decoder for it.
struct OpenVideo {
  FormatPtr format;
  AVStream* stream = nullptr;
  const AVCodec* codec = nullptr;
};

OpenVideo open_video(const fs::path& file) {
  require_regular_file(file, "video");
  quiet_ffmpeg();
  OpenVideo v;
  AVFormatContext* raw =
      static_cast<AVFormatContext*>(checked_alloc(ff().avformat_alloc_context()));
  AVDictionary* options_raw = nullptr;
  ff().av_dict_set(&options_raw, "format_whitelist", kDemuxers, 0);
  ff().av_dict_set(&options_raw, "protocol_whitelist", "file", 0);
  std::unique_ptr<AVDictionary, DictFree> options(options_raw);
  // "file:" keeps a name with a colon ("a:b.mp4") from reading as a protocol.
  const std::string url = "file:" + file.string();
  AVDictionary* opts = options.release();
  const int err =
      ff().avformat_open_input(&raw, url.c_str(), nullptr, &opts);  // frees raw on error
  options.reset(opts);
  if (err < 0) {
    if (err == AVERROR_EOF)
      fail(file, "is empty or truncated: it ends before FFmpeg finds a stream in it; " +
                     std::string(kFormatsFix) + " that plays");
    if (err == AVERROR_INVALIDDATA || err == AVERROR(EINVAL))
      fail(file, "is not a video file FFmpeg can read, or is corrupt or truncated (" +
                     av_error(err) + "); " + kFormatsFix +
                     " that plays (an MP4 whose index was never written is truncated)");
    fail(file, "cannot be opened as a video (" + av_error(err) + "); " + kFormatsFix);
  }
  v.format.reset(raw);
  if (const int e = ff().avformat_find_stream_info(v.format.get(), nullptr); e < 0)
    fail(file, "is corrupt or truncated: its streams cannot be read (" + av_error(e) +
                   "); re-encode or re-download the file");
  const int index =
      ff().av_find_best_stream(v.format.get(), AVMEDIA_TYPE_VIDEO, -1, -1, &v.codec, 0);
  const bool none_known =
      std::all_of(v.format->streams, v.format->streams + v.format->nb_streams,
                  [](const AVStream* s) { return s->codecpar->codec_id == AV_CODEC_ID_NONE; });
  if (index < 0 && none_known)
    // An MP4 cut before its index ('moov') shows a stream of no known codec.
    fail(file,
         "is truncated or corrupt: FFmpeg finds no stream it can identify in it; "
         "re-encode or re-download the file");
  if (index == AVERROR_STREAM_NOT_FOUND)
    fail(file, "has no video stream (its " + std::to_string(v.format->nb_streams) +
                   " stream(s) are audio, subtitles or data); name a file with a video track");
  if (index == AVERROR_DECODER_NOT_FOUND || (index >= 0 && !v.codec)) {
    // av_find_best_stream names no stream then: find the codec to name it.
    std::string name = "unknown";
    for (unsigned i = 0; i < v.format->nb_streams; ++i)
      if (v.format->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO)
        name = ff().avcodec_get_name(v.format->streams[i]->codecpar->codec_id);
    fail(file, "uses the video codec '" + name +
                   "', which this FFmpeg cannot decode; re-encode it as H.264, VP9 or AV1 "
                   "(e.g. ffmpeg -i in -c:v libx264 out.mp4)");
  }
  if (index < 0) fail(file, "has no readable video stream (" + av_error(index) + ")");
  v.stream = v.format->streams[index];
  if (v.stream->disposition & AV_DISPOSITION_ATTACHED_PIC)
    fail(file, "holds only a still picture (cover art), no video stream; name a video file");
  return v;
}

// `threads`: 0 lets FFmpeg pick (one per core); the frames are the same.
CodecPtr open_decoder(const fs::path& file, const OpenVideo& v, int threads = 1) {
  CodecPtr ctx(static_cast<AVCodecContext*>(checked_alloc(ff().avcodec_alloc_context3(v.codec))));
  if (const int e = ff().avcodec_parameters_to_context(ctx.get(), v.stream->codecpar); e < 0)
    fail(file, "has video parameters FFmpeg rejects (" + av_error(e) + "); re-encode the file");
  ctx->thread_count = threads;
  if (const int e = ff().avcodec_open2(ctx.get(), v.codec, nullptr); e < 0)
    fail(file, "cannot be decoded: the '" + std::string(v.codec->name) +
                   "' decoder refuses its stream (" + av_error(e) + "); re-encode the file");
  return ctx;
}

std::string size_text(int64_t w, int64_t h) {
  return std::to_string(w) + "x" + std::to_string(h);
}

// Converts `frame` to RGB24 into `dst` (height x width x 3). As PyAV's
// to_ndarray(format="rgb24"): a cached swscale context, SWS_BILINEAR, no
// sws_setColorspaceDetails (PyAV leaves the colourspace and range alone
// when it is not asked to change them), into a frame buffer of FFmpeg's
// alignment, rows copied out.
void to_rgb(const fs::path& file, int64_t number, const AVFrame* frame, SwsPtr& sws, AVFrame* rgb,
            uint8_t* dst) {
  const auto format = static_cast<AVPixelFormat>(frame->format);
  sws.reset(ff().sws_getCachedContext(sws.release(), frame->width, frame->height, format,
                                      frame->width, frame->height, AV_PIX_FMT_RGB24, SWS_BILINEAR,
                                      nullptr, nullptr, nullptr));
  if (!sws) {
    const char* name = ff().av_get_pix_fmt_name(format);
    fail(file, "frame " + std::to_string(number) + " has the pixel format '" +
                   (name ? name : "unknown") +
                   "', which swscale cannot convert to RGB; re-encode the file (e.g. as yuv420p)");
  }
  if (rgb->width != frame->width || rgb->height != frame->height || !rgb->data[0]) {
    ff().av_frame_unref(rgb);
    rgb->format = AV_PIX_FMT_RGB24;
    rgb->width = frame->width;
    rgb->height = frame->height;
    if (ff().av_frame_get_buffer(rgb, 0) < 0) throw std::bad_alloc();
  }
  ff().sws_scale(sws.get(), frame->data, frame->linesize, 0, frame->height, rgb->data,
                 rgb->linesize);
  const size_t row = static_cast<size_t>(frame->width) * 3;
  for (int y = 0; y < frame->height; ++y)
    std::memcpy(dst + static_cast<size_t>(y) * row, rgb->data[0] + y * rgb->linesize[0], row);
}

bool has_video_extension(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".mp4" || ext == ".m4v" || ext == ".mov" || ext == ".mkv" || ext == ".webm";
}

}  // namespace

bool is_video_file(const fs::path& file) {
  if (has_video_extension(file)) return true;
  // Opening a FIFO to sniff it would block: only regular files are sniffed
  // (the image reader names what else it is).
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return false;
  std::ifstream in(file, std::ios::binary);
  std::array<unsigned char, 12> head{};
  if (!in.read(reinterpret_cast<char*>(head.data()), head.size())) return false;
  const bool mp4 = std::memcmp(head.data() + 4, "ftyp", 4) == 0;
  const bool ebml = head[0] == 0x1A && head[1] == 0x45 && head[2] == 0xDF && head[3] == 0xA3;
  return mp4 || ebml;
}

VideoInfo probe_video(const fs::path& file, int64_t max_pixels) {
  OpenVideo v = open_video(file);
  const AVCodecParameters* par = v.stream->codecpar;
  VideoInfo info;
  info.width = par->width;
  info.height = par->height;
  info.codec = ff().avcodec_get_name(par->codec_id);
  info.container = v.format->iformat->name;
  if (info.width <= 0 || info.height <= 0)
    fail(file, "gives no frame size for its video stream (" + size_text(info.width, info.height) +
                   "): it is corrupt or truncated; re-encode the file");
  if (info.height > max_pixels / info.width)
    fail(file, "has " + size_text(info.width, info.height) + " frames, over the limit of " +
                   std::to_string(max_pixels) +
                   " pixels per frame (limits.max_image_pixels sets it; scale the video down or "
                   "raise the limit)");
  AVRational rate = v.stream->avg_frame_rate;
  if (rate.num <= 0 || rate.den <= 0) rate = v.stream->r_frame_rate;
  if (rate.num <= 0 || rate.den <= 0)
    fail(file,
         "gives no frame rate for its video stream, which frame sampling by fps needs; "
         "remux it with a rate (e.g. ffmpeg -i in -c copy -r 30 out.mkv)");
  info.fps = av_q2d(rate);
  // The frames are counted from the packets (one frame each; edit-list
  // packets the decoder discards are not counted), not taken from the
  // header, which Matroska and WebM leave empty.
  const DemuxErrors errors;
  PacketPtr pkt(ff().av_packet_alloc());
  if (!pkt) throw std::bad_alloc();
  int64_t packets = 0;
  for (;;) {
    const int e = ff().av_read_frame(v.format.get(), pkt.get());
    if (e == AVERROR_EOF) break;
    if (e < 0)
      fail(file, "is corrupt or truncated: reading it failed after " + std::to_string(packets) +
                     " video packets (" + av_error(e) + "); re-encode or re-download the file");
    if (pkt->stream_index == v.stream->index) {
      if (pkt->flags & AV_PKT_FLAG_CORRUPT)
        fail(file, "is truncated or corrupt: video packet " + std::to_string(packets + 1) +
                       " is incomplete; re-encode or re-download the file");
      ++packets;
      if (!(pkt->flags & AV_PKT_FLAG_DISCARD)) ++info.total_frames;
    }
    ff().av_packet_unref(pkt.get());
  }
  if (!errors.first().empty())
    fail(file, "is truncated or corrupt: FFmpeg reports \"" + errors.first() + "\" after " +
                   std::to_string(packets) + " video packets; re-encode or re-download the file");
  if (v.stream->nb_frames > 0 && packets < v.stream->nb_frames)
    fail(file, "is truncated: its index lists " + std::to_string(v.stream->nb_frames) +
                   " video frames but only " + std::to_string(packets) +
                   " are in the file; re-encode or re-download the file");
  if (info.total_frames == 0)
    fail(file, "has a video stream with no frames; name a video that holds frames");
  // Opening the decoder here refuses a codec FFmpeg knows but cannot set up
  // before anything runs.
  open_decoder(file, v);
  return info;
}

DecodedImage decode_video_frames(const fs::path& file, const std::vector<int64_t>& indices,
                                 const ImageInfo& expected) {
  OpenVideo v = open_video(file);
  CodecPtr ctx = open_decoder(file, v, 0);
  DecodedImage out;
  out.height = expected.height;
  out.width = expected.width;
  out.frames = static_cast<int64_t>(indices.size());
  const size_t frame_bytes = static_cast<size_t>(out.height * out.width * 3);
  out.pixels.resize(frame_bytes * indices.size());
  if (indices.empty()) return out;

  PacketPtr pkt(ff().av_packet_alloc());
  FramePtr frame(ff().av_frame_alloc());
  FramePtr rgb(ff().av_frame_alloc());
  if (!pkt || !frame || !rgb) throw std::bad_alloc();
  SwsPtr sws;
  size_t next = 0;     // the next wanted index in `indices`
  int64_t number = 0;  // frames the decoder has given so far
  // Takes every frame the decoder has ready; true once the last wanted one is kept.
  auto drain = [&]() {
    for (;;) {
      const int e = ff().avcodec_receive_frame(ctx.get(), frame.get());
      if (e == AVERROR(EAGAIN) || e == AVERROR_EOF) return false;
      if (e < 0)
        fail(file, "is corrupt: decoding frame " + std::to_string(number) + " failed (" +
                       av_error(e) + "); re-encode or re-download the file");
      if (frame->width != out.width || frame->height != out.height)
        fail(file, "changes size: frame " + std::to_string(number) + " is " +
                       size_text(frame->width, frame->height) + " but the stream is " +
                       size_text(out.width, out.height) +
                       "; every frame of a video must have one size (re-encode it at one size)");
      while (next < indices.size() && indices[next] == number) {
        to_rgb(file, number, frame.get(), sws, rgb.get(), out.pixels.data() + next * frame_bytes);
        ++next;
      }
      ff().av_frame_unref(frame.get());
      ++number;
      if (next == indices.size()) return true;
    }
  };
  // Sends one packet (nullptr: the end); false when the decoder refused it.
  auto send = [&](const AVPacket* packet) {
    for (;;) {
      const int e = ff().avcodec_send_packet(ctx.get(), packet);
      if (e == AVERROR(EAGAIN)) {
        if (drain()) return;
        continue;
      }
      if (e < 0 && e != AVERROR_EOF)
        fail(file, "is corrupt: a packet after frame " + std::to_string(number) +
                       " cannot be decoded (" + av_error(e) +
                       "); re-encode or re-download the file");
      return;
    }
  };
  for (;;) {
    const int e = ff().av_read_frame(v.format.get(), pkt.get());
    if (e == AVERROR_EOF) {
      send(nullptr);
      drain();
      break;
    }
    if (e < 0)
      fail(file, "is corrupt or truncated: reading it failed after frame " +
                     std::to_string(number) + " (" + av_error(e) + ")");
    if (pkt->stream_index == v.stream->index) send(pkt.get());
    ff().av_packet_unref(pkt.get());
    if (next == indices.size() || drain()) break;
  }
  if (next < indices.size())
    fail(file, "ended after " + std::to_string(number) + " decoded frames, before frame " +
                   std::to_string(indices[next]) +
                   " (it changed since it was read, or is corrupt); re-encode the file");
  return out;
}

}  // namespace encgraph::host
