// Where a plugin's weights come from: a safetensors checkpoint (single file or
// sharded) or, with weights = "random", deterministic draws from a seed so a
// model of any configured size can run without a checkpoint.
#pragma once

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
  // finite. Random: values depend only on (seed, name, index).
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

}  // namespace encoder_kit
