// A float64 reference of DeepSeek-OCR-2's vision side and its processor,
// written separately from the plugin and as directly as transformers reads
// (docs/models/deepseek_ocr2.md): DeepseekOcr2ImageProcessor's global resize/pad
// and crop grid, the SAM ViT (windowed attention over zero-padded windows,
// decomposed relative positions, antialiased bicubic pos_embed), neck and
// downsampling convolutions, the Qwen2-style encoder with its learned queries
// and image-bidirectional / query-causal mask, the projector, and
// get_image_features' [local rows, global rows, view_separator] layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dsocr2_ref {

struct Config {
  // SAM
  int64_t patch = 4, sam_image = 64, sam_hidden = 32, sam_layers = 3, sam_heads = 2;
  int64_t sam_mlp = 48, window = 5, neck = 16, down1 = 24;
  std::vector<int64_t> global_layers = {1};
  // encoder (width = down2 = enc_hidden)
  int64_t enc_hidden = 32, enc_layers = 2, enc_heads = 4, enc_kv_heads = 2, enc_inter = 40;
  double rope_theta = 10000.0;
  int64_t text_hidden = 24;
  // processor
  int64_t global_size = 64, tile = 48, min_crops = 2, max_crops = 6;

  int64_t view_tokens(int64_t side) const;  // ceil(ceil(side/patch/2)/2)^2
};

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c);

// Parameters by the DeepSeek release names (model.sam_model.* ...).
using Params = std::map<std::string, std::vector<double>>;
Params random_params(const Config& c, uint64_t seed);
// Writes them under the release names, or (transformers = true) under
// transformers' names with `prefix` ("model." or "").
void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  bool transformers = false, const std::string& prefix = "model.");

// get_optimal_tiled_canvas: (cols, rows); (0, 0) when the image gets no crops.
std::pair<int64_t, int64_t> crop_grid(const Config& c, int64_t height, int64_t width);

struct Views {
  std::vector<double> global;              // [3, S, S]
  std::vector<std::vector<double>> crops;  // each [3, T, T], row-major order
};
Views preprocess(const Config& c, const std::vector<uint8_t>& rgb, int64_t height, int64_t width);

// One view through vision_tower + multi_modal_projector: [queries, text_hidden].
std::vector<double> encode_view(const Config& c, const Params& p, const std::vector<double>& px,
                                int64_t side);

// get_image_features for one image: [crops*Lq + Gq + 1, text_hidden].
std::vector<double> image_features(const Config& c, const Params& p, const Views& v);

std::vector<uint8_t> random_pixels(int64_t height, int64_t width, uint64_t seed);

}  // namespace dsocr2_ref
