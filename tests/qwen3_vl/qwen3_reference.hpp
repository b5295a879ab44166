// A float64 reference of the Qwen3-VL vision tower and its processor, written
// separately from the plugin and as directly as transformers reads
// (Qwen3VLVisionModel: fast_pos_embed_interpolate with its linspace, the
// row-major interpolation then the merge permute, rot_pos_emb, cu_seqlens per
// temporal patch, LayerNorm blocks, the mergers and deepstack_merger_list), so
// the plugin's layout is checked against the plain definition.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace qwen3_ref {

struct Config {
  int64_t depth = 4, hidden = 64, heads = 4, inter = 96, out = 48;
  int64_t patch = 16, temporal = 2, merge = 2, pos_side = 6;
  std::vector<int64_t> deepstack = {2, 0, 3};  // unsorted: the merger order matters
  int64_t head_dim() const { return hidden / heads; }
  int64_t patch_dim() const { return 3 * temporal * patch * patch; }
};

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c);

using Params = std::map<std::string, std::vector<double>>;
// Parameters under `prefix` ("visual." or "model.visual."), f32-representable.
Params random_params(const Config& c, uint64_t seed, const std::string& prefix = "visual.");
void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix = "visual.");

struct Input {
  int64_t t, h, w;           // grid in patches
  std::vector<double> rows;  // processor-order patch rows [t*h*w, patch_dim]
};

// The processor's output for frames already sized to multiples of 32 (no
// resize): rescale, mean/std 0.5, time padding, the 10-D permute.
Input preprocess(const Config& c, const std::vector<uint8_t>& pixels, int64_t frames,
                 int64_t height, int64_t width);

// The tower on a batch: outputs[o][item] = [tokens, out] rows, o = 0 the
// merger's (pooler_output), o = 1.. the deepstack features in layer order.
std::vector<std::vector<std::vector<double>>> forward(const Config& c, const Params& p,
                                                      const std::vector<Input>& items,
                                                      const std::string& prefix = "visual.");

std::vector<uint8_t> random_pixels(int64_t frames, int64_t height, int64_t width, uint64_t seed);

}  // namespace qwen3_ref
