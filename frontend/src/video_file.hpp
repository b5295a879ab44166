// Video files (MP4/MOV, Matroska, WebM) through FFmpeg's libraries: the
// stream's geometry, frame count and rate read before anything runs, and
// the sampled frames decoded to RGB24 as PyAV's
// frame.to_ndarray(format="rgb24") makes them (swscale, SWS_BILINEAR, the
// source's pixel format with swscale's default colour matrix and range
// handling; docs/media.md). Only the mov/mp4 and matroska/webm demuxers and
// the file protocol are allowed: a hostile file cannot make FFmpeg open a
// playlist, another file or a URL.
#pragma once

#include "image_io.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace encgraph::host {

struct VideoInfo {
  int64_t height = 0;
  int64_t width = 0;
  int64_t total_frames = 0;  // the video stream's packets, counted (one frame each)
  double fps = 0.0;          // the stream's average frame rate (PyAV's average_rate)
  std::string codec;         // "h264", "ffv1", ...
  std::string container;     // the demuxer, "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm"
};

// Whether `file` is meant as a video: a video extension (.mp4, .m4v, .mov,
// .mkv, .webm, any case) or, for any other name, the MP4 ('ftyp') or EBML
// (Matroska/WebM) signature at its start. Reads at most 12 bytes of a
// regular file; anything else, or a file that cannot be read, is not a video
// (the image reader then names the problem).
bool is_video_file(const std::filesystem::path& file);

// Opens the file and reads its video stream's header and packets (no
// decoding). Throws encgraph::Error (kind Input) naming the file and the fix
// when it is not a regular file, not a container FFmpeg is allowed to read,
// corrupt or truncated (fewer packets than the container lists), has no
// video stream, a codec this FFmpeg cannot decode, zero frames, no frame
// rate, or frames over `max_pixels` (limits.max_image_pixels).
VideoInfo probe_video(const std::filesystem::path& file, int64_t max_pixels);

// Decodes the stream from its start and keeps the frames at `indices`
// (ascending, as sample_frame_indices gives them), stopping after the last.
// The frames must be `expected`'s size (probed when the workload was read).
// Throws encgraph::Error (kind Input) naming the file and the frame when a
// packet cannot be decoded, the stream ends before a wanted frame, or a frame
// has another size.
DecodedImage decode_video_frames(const std::filesystem::path& file,
                                 const std::vector<int64_t>& indices, const ImageInfo& expected);

}  // namespace encgraph::host
