// An image's forward work, reported as eg_item_spec::input_size so that
// data-parallel ranks get equal work (encoder_kit/work_estimate.hpp). Each
// view runs the same way whatever the image: the global view (global_size) and
// every local crop (tile_size) through the SAM, the neck and downsampling
// convolutions, the encoder over [image tokens | queries] and the projector.
// A view's cost is fixed by its side, and the global view costs more than a
// crop (4096 against 2304 SAM patches at the released sizes, and the SAM's
// global-attention layers grow with the square), so an image is counted as
// global + crops x tile FLOPs, not as 1 + crops views.
#pragma once

#include "dsocr2_config.hpp"

#include <encoder_kit/work_estimate.hpp>

#include <cstdint>

namespace dsocr2 {

// FLOPs (2 per multiply-add) of one view of `side` pixels: the SAM's products
// (windowed layers over their zero-padded windows) and attention, the neck and
// downsampling convolutions, the encoder (the prefix mask's pairs) and the
// projector.
encoder_kit::Flops view_flops(const ModelConfig& m, int64_t side);

// What one SAM patch costs in the SAM layers' products: the unit.
int64_t sam_patch_unit_flops(const ModelConfig& m);

// An image with `crops` local crops, in SAM-patch-equivalents: input_size.
int64_t image_work(const ModelConfig& m, int64_t crops);

}  // namespace dsocr2
