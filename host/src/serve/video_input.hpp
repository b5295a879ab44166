// A video file sent to `encgraph serve` (the "videos" input): decoded to the
// frames `encgraph encode` would give the same file, so that a served video's
// embeddings are encode's. FFmpeg reads files only (its demuxers are limited
// to regular files, docs/media.md), so the bytes go through a private
// temporary file that is removed before returning.
#pragma once

#include "config.hpp"
#include "image_io.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace encgraph::host::serve {

// The sampled frames of the video file `bytes` (frames x height x width x 3),
// sampled by `video` (video.sampling and its keys, as encode samples), each
// frame at most `max_pixels` pixels and at most `max_frames` frames sampled.
// Throws encgraph::Error (kind Input) naming `label` ("videos[0]") and the
// fix when the bytes are no video FFmpeg may read or break a limit.
DecodedImage decode_video_bytes(const std::vector<uint8_t>& bytes, const std::string& label,
                                const VideoConfig& video, int64_t max_pixels, int64_t max_frames);

}  // namespace encgraph::host::serve
