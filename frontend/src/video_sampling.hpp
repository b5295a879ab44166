// Which frames of a video file a model sees: the frame sampling of the model
// family's own processor, so that a video file given to encgraph yields the
// frames the reference pipeline would feed the model (docs/media.md).
//
// - qwen2_5_vl (and every plugin not named qwen3*): qwen-vl-utils'
//   smart_nframes with its reader's indices (vision_process.py:
//   smart_nframes, _read_video_*). Transformers' Qwen2VLVideoProcessor
//   leaves do_sample_frames off by default and expects frames sampled so.
// - qwen3_vl: transformers' Qwen3VLVideoProcessor.sample_frames.
// - qwen2_5_vl_transformers (asked for by name): transformers'
//   Qwen2VLVideoProcessor.sample_frames, what its processor does with
//   do_sample_frames=True: the same count rule as qwen-vl-utils but indices
//   arange(0, total, total / n) truncated, not linspace rounded (16 frames at
//   8 fps: [0, 4, 8, 12] against qwen-vl-utils' [0, 5, 10, 15]).
#pragma once

#include "config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace encgraph::host {

enum class SamplingRule {
  QwenVlUtils,          // nframes by fps, clamped, floored to the frame factor
  Qwen3Vl,              // nframes by fps, truncated, clamped, no factor
  TransformersQwen2Vl,  // QwenVlUtils' count, arange indices
};

struct SamplingParams {
  SamplingRule rule = SamplingRule::QwenVlUtils;
  double fps = 2.0;          // frames sampled per second of video
  int64_t min_frames = 4;    // before the rule's own rounding
  int64_t max_frames = 768;  // likewise
  int64_t frame_factor = 2;  // QwenVlUtils: counts are multiples of this (temporal patch)
  std::string origin;        // where the values came from, for the report and messages
};

// The rule and its values: [video] keys first, then the checkpoint folder's
// video_preprocessor_config.json or preprocessor_config.json (when
// plugin.weights is a folder: fps, min_frames, max_frames,
// temporal_patch_size), then the family's defaults. A folder file that is
// not JSON or holds a key of the wrong type is an Input error naming the
// file and key.
SamplingParams sampling_params(const VideoConfig& config);

// "qwen-vl-utils smart_nframes" or "transformers Qwen3VLVideoProcessor.sample_frames".
std::string rule_name(SamplingRule rule);

// The sampled frame indices (ascending, each in [0, total_frames)) of a video
// of `total_frames` frames at `video_fps`. Throws encgraph::Error (kind
// Input) when the rule cannot sample the video (QwenVlUtils: fewer than
// frame_factor frames), saying why; the caller adds the file's name.
std::vector<int64_t> sample_frame_indices(const SamplingParams& params, int64_t total_frames,
                                          double video_fps);

}  // namespace encgraph::host
