// The files of a Hugging Face checkpoint folder that configure a Qwen-VL
// tower: config.json's vision_config (sizes), and the processors' configs
// (pixel bounds, checked against the sizes and the normalisation the plugin
// implements).
#pragma once

#include "config.hpp"

#include <encoder_kit/config_json.hpp>

#include <string>

namespace qwen_vl {

// Reads config.json (or a bare vision config) at `path` into `c`, refusing
// another model type or activation than the version's.
void read_config_json(const std::string& path, VisionConfig& c);

// The folder's preprocessor_config.json (image bounds become the defaults)
// and, for VideoPixels::AllFrames, video_preprocessor_config.json (the video
// bounds); both must agree with the tower's sizes (checked after validate()).
void read_processor_configs(const encoder_kit::CheckpointFolder& folder, Options& o);

}  // namespace qwen_vl
