// A video given as frame image files (PNG, JPEG, one file per frame, in
// order): checking that the frames agree, and decoding them into the one
// buffer eg_item_desc's `pixels` expects for several frames
// (frames x height x width x channels, frame after frame).
#pragma once

#include "image_io.hpp"

#include <string>
#include <vector>

namespace encgraph::host {

// Reads every frame's header (not its pixels) and returns the first frame's
// geometry. Throws encgraph::Error (kind Input) naming the first frame that
// is missing, not a PNG or JPEG image, over `max_pixels`, or of another size
// or channel count than the first frame, with the fix.
ImageInfo probe_frames(const std::vector<std::string>& files, int64_t max_pixels);

// Decodes every frame to RGB, concatenated in order. Throws encgraph::Error
// (kind Input) naming a frame that cannot be decoded or whose size differs
// from the first frame's (or from `expected`, the size probed when the
// workload was read).
DecodedImage decode_frames(const std::vector<std::string>& files, int64_t max_pixels,
                           const ImageInfo* expected = nullptr);

}  // namespace encgraph::host
