// FFmpeg's libraries, loaded when the first video file is read (dlopen), so
// that encgraph starts and runs images on a machine without them (the GPU
// bundle need not carry FFmpeg's 40 MiB of dependencies); a video file there
// is an error naming the missing library and the fix. The sonames are those
// of the headers encgraph was built with.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

namespace encgraph::host {

// Every FFmpeg function video_file.cpp calls.
#define EG_FFMPEG_FUNCTIONS(X)              \
  X(avutil, av_dict_set)                    \
  X(avutil, av_dict_free)                   \
  X(avutil, av_strerror)                    \
  X(avutil, av_log_set_callback)            \
  X(avutil, av_log_format_line2)            \
  X(avutil, av_frame_alloc)                 \
  X(avutil, av_frame_free)                  \
  X(avutil, av_frame_unref)                 \
  X(avutil, av_frame_get_buffer)            \
  X(avutil, av_get_pix_fmt_name)            \
  X(swscale, sws_getCachedContext)          \
  X(swscale, sws_scale)                     \
  X(swscale, sws_freeContext)               \
  X(avcodec, avcodec_get_name)              \
  X(avcodec, avcodec_alloc_context3)        \
  X(avcodec, avcodec_free_context)          \
  X(avcodec, avcodec_parameters_to_context) \
  X(avcodec, avcodec_open2)                 \
  X(avcodec, avcodec_send_packet)           \
  X(avcodec, avcodec_receive_frame)         \
  X(avcodec, av_packet_alloc)               \
  X(avcodec, av_packet_free)                \
  X(avcodec, av_packet_unref)               \
  X(avformat, avformat_alloc_context)       \
  X(avformat, avformat_open_input)          \
  X(avformat, avformat_close_input)         \
  X(avformat, avformat_find_stream_info)    \
  X(avformat, av_find_best_stream)          \
  X(avformat, av_read_frame)

struct FfmpegApi {
#define EG_FFMPEG_POINTER(lib, name) decltype(&::name) name = nullptr;
  EG_FFMPEG_FUNCTIONS(EG_FFMPEG_POINTER)
#undef EG_FFMPEG_POINTER
};

// The loaded functions. Throws encgraph::Error (kind Input) naming the
// library that cannot be loaded (or the function it lacks) and how to
// install FFmpeg's libraries. Loaded once per process; later calls return
// the same table (or throw the same error).
const FfmpegApi& ffmpeg();

}  // namespace encgraph::host
