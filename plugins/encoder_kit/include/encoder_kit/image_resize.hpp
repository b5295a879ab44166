// Resizing 8-bit images the way the released Hugging Face image processors do
// (PIL's Image.resize): separable filtering, horizontal pass first, the filter
// widened when shrinking (antialiasing), fixed-point weights, and each pass
// rounded and clamped back to 8 bits.
#pragma once

#include <cstdint>
#include <vector>

namespace encoder_kit::image {

enum class Filter { Bilinear, Bicubic };

// src: height x width x channels, row-major. Returns out_h x out_w x channels.
std::vector<uint8_t> resize(const uint8_t* src, int64_t height, int64_t width, int64_t channels,
                            int64_t out_h, int64_t out_w, Filter filter);

}  // namespace encoder_kit::image
