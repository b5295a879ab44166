// encode()'s images and videos, read from Python objects while the GIL is
// held (paths, PIL images, uint8 arrays through the buffer protocol, lists
// of frames), then turned into decoded pixels without it.
#pragma once

#include <config.hpp>
#include <image_io.hpp>

#include <encgraph/plugin_api.h>

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace encgraph::python {

// One frame (or, for a TxHxWx3 array, `frames` frames) of pixels: borrowed
// from a Python buffer (kept alive by Inputs::buffers), owned, or a file
// decoded later.
struct Pixels {
  std::string file;  // an image file to decode; empty for pixels in memory
  const uint8_t* data = nullptr;
  std::vector<uint8_t> owned;  // when the source could not be borrowed
  int64_t frames = 1;
  int64_t height = 0;
  int64_t width = 0;
};

// One item of encode(): an image (one Pixels), a video as frames (one Pixels
// per frame, or one of T frames), or a video file.
struct Source {
  eg_modality modality = EG_MODALITY_IMAGE;
  std::string label;  // "images[2] ('cat.png')": how errors name it
  std::vector<Pixels> parts;
  std::string video_file;
};

struct Inputs {
  std::vector<Source> sources;  // images first, then videos, each in the order given
  // Buffers the sources borrow from; released (with the GIL) when Inputs dies.
  std::vector<std::unique_ptr<pybind11::buffer_info>> buffers;
};

// Reads encode()'s arguments (None, or a list or tuple of items). Raises
// TypeError when `images` or `videos` is not a sequence of items, and
// InputError (naming the item) for an item of the wrong type, dtype or shape.
Inputs read_inputs(const pybind11::object& images, const pybind11::object& videos);

// The item's pixels as one buffer in eg_item_desc's layout (frames x height
// x width x 3), checked against the config's limits. Borrowed pixels are used
// in place when a single part holds them all. Called without the GIL.
struct ItemPixels {
  host::DecodedImage decoded;  // when the pixels had to be decoded or joined
  const uint8_t* data = nullptr;
  int64_t frames = 1, height = 0, width = 0;
};
ItemPixels load_pixels(const Source& source, const host::HostConfig& config);

}  // namespace encgraph::python
