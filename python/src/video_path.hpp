// Video files given to encode() by path: decoded as `encgraph encode` decodes
// them (frontend/src/video_file.hpp, frames sampled by the config's [video]
// rule), when this build's front-end library reads video files.
#pragma once

#include <config.hpp>
#include <image_io.hpp>

#include <string>

namespace encgraph::python {

bool video_files_supported();

// The sampled frames of `file`; errors (InputError) begin with `label`.
host::DecodedImage decode_video_path(const std::string& file, const host::HostConfig& config,
                                     const std::string& label);

}  // namespace encgraph::python
