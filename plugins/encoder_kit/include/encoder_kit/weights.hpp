// Where a plugin's weights come from: a safetensors checkpoint (single file or
// sharded) or, with weights = "random", deterministic draws from a seed so a
// model of any configured size can run without a checkpoint.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace encoder_kit {

class TensorStore;

// Throws Error(INVALID_ARGUMENT) when `elements` f32 weights would not fit in
// this machine's memory, so a size typo (hidden_size = 655360) is named before
// anything is allocated. `what` names the tower and the keys that size it.
void require_weights_fit(int64_t elements, const std::string& what);

// How a tensor is drawn when the weights are random.
struct RandomInit {
  enum class Kind { Normal, Constant };
  Kind kind = Kind::Normal;
  double mean = 0.0;  // Normal: mean; Constant: the value
  double std = 0.02;

  static RandomInit normal(double std, double mean = 0.0) { return {Kind::Normal, mean, std}; }
  static RandomInit constant(double value) { return {Kind::Constant, value, 0.0}; }
};

// The draws the kit's ViT plugins share for random weights: a matrix scaled
// by its fan-in, small biases, norm weights near one.
namespace random_init {
inline RandomInit matrix(int64_t fan_in) {
  return RandomInit::normal(1.0 / std::sqrt(static_cast<double>(fan_in)));
}
inline const RandomInit kBias = RandomInit::normal(0.02);
inline const RandomInit kNormWeight = RandomInit::normal(0.1, 1.0);
}  // namespace random_init

class WeightSource {
 public:
  // `spec`: "random" (or empty) for drawn weights, else a checkpoint path
  // (see TensorStore::open). `check_finite`: a checkpoint tensor holding NaN
  // or infinity is an error (the [plugin.config] key check_finite).
  WeightSource(const std::string& spec, uint64_t seed, bool check_finite = true);
  ~WeightSource();
  WeightSource(WeightSource&&) noexcept;
  WeightSource& operator=(WeightSource&&) noexcept;

  bool is_random() const { return !store_; }
  std::string description() const;

  // Tensor `name` as f32 with exactly `shape`. From a checkpoint: errors name
  // the tensor and the file when it is missing, mis-shaped or (checked) not
  // finite; an F8_E4M3 tensor (an FP8 checkpoint) is its codes times
  // `<name>_scale`, per tensor or per row (read_e4m3_as_f32). Random: values
  // depend only on (seed, name, index).
  std::vector<float> load(const std::string& name, const std::vector<int64_t>& shape,
                          const RandomInit& init) const;

  // Whether a checkpoint holds tensor `name` (random weights hold every name):
  // lets a plugin detect which naming layout a checkpoint uses.
  bool contains(const std::string& name) const;

  // The vision tower's prefix in a Qwen-VL checkpoint: "model.visual." where
  // transformers >= 4.52 saved the nested layout (probe: its patch
  // embedding), else the released "visual." (random weights too).
  std::string qwen_visual_prefix() const;

 private:
  std::unique_ptr<TensorStore> store_;
  uint64_t seed_ = 0;
  bool check_finite_ = true;
};

// Reads `<prefix><name>` through one WeightSource (a checkpoint's prefix, such
// as the weight_prefix key, in front of every name).
struct PrefixedReader {
  const WeightSource& src;
  const std::string& prefix;
  std::vector<float> operator()(const std::string& name, const std::vector<int64_t>& shape,
                                const RandomInit& init) const {
    return src.load(prefix + name, shape, init);
  }
};

// q, k and v projections `<p>q_proj`, `<p>k_proj`, `<p>v_proj` (each
// .weight [d, d], .bias [d]; zeros for a model without biases) fused into one
// [3d, d] product, read in that order.
inline void read_fused_qkv(const PrefixedReader& read, const std::string& p, int64_t d, bool bias,
                           std::vector<float>& w, std::vector<float>& b) {
  for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
    const std::string n = p + proj;
    const std::vector<float> pw = read(n + ".weight", {d, d}, random_init::matrix(d));
    const std::vector<float> pb = bias ? read(n + ".bias", {d}, random_init::kBias)
                                       : std::vector<float>(static_cast<size_t>(d), 0.0f);
    w.insert(w.end(), pw.begin(), pw.end());
    b.insert(b.end(), pb.begin(), pb.end());
  }
}

}  // namespace encoder_kit
