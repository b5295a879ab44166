// A float64 reference of transformers' SiglipVisionModel on one image, written
// separately from the plugin and as directly as the PyTorch modules read: the
// Conv2d as a loop over its kernel, full softmax attention per head,
// nn.MultiheadAttention with the probe as query for the pooling head. Every
// hidden state is kept, so feature layers are checked too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace siglip_ref {

struct Config {
  // 26 = 4 x 6 + 2: like so400m-patch14-384, the convolution drops a margin.
  int64_t layers = 3, hidden = 32, heads = 4, inter = 48, image = 26, patch = 6;
  double eps = 1e-6;
  int64_t grid() const { return image / patch; }
  int64_t tokens() const { return grid() * grid(); }
  int64_t head_dim() const { return hidden / heads; }
};

// Plugin config entries describing the same tower.
std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c);

// Parameters by checkpoint name without the "vision_model." prefix, as doubles
// holding f32-representable values.
using Params = std::map<std::string, std::vector<double>>;
Params random_params(const Config& c, uint64_t seed);
std::vector<int64_t> shape_of(const Config& c, const std::string& name);

// Writes the parameters, except those named in `skip`, as F32 tensors named
// prefix + name into one safetensors file.
void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix = "vision_model.",
                  const std::set<std::string>& skip = {});

struct Outputs {
  std::vector<std::vector<double>> hidden_states;  // embeddings, then each layer: [tokens, hidden]
  std::vector<double> last_hidden_state;           // post_layernorm(hidden_states.back())
  std::vector<double> pooled;                      // the head: [hidden]
};

// rgb: image x image x 3 bytes, already at the model's size.
Outputs forward(const Config& c, const Params& p, const std::vector<uint8_t>& rgb);

std::vector<uint8_t> random_pixels(int64_t height, int64_t width, int64_t channels, uint64_t seed);

}  // namespace siglip_ref
