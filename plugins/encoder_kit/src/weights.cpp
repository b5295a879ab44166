#include <encoder_kit/checked.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/random.hpp>
#include <encoder_kit/safetensors.hpp>
#include <encoder_kit/weights.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

namespace encoder_kit {

void require_weights_fit(int64_t elements, const std::string& what) {
  const int64_t bytes = checked_mul(elements, 4, what);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: nothing to compare against
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double have = static_cast<double>(pages) * static_cast<double>(page);
  if (static_cast<double>(bytes) > have) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "%.1f GiB of f32 weights (%lld values), more than this "
                  "machine's %.1f GiB of memory",
                  static_cast<double>(bytes) / gib, static_cast<long long>(elements), have / gib);
    fail(EG_ERR_INVALID_ARGUMENT, what + " needs " + text + ": check its sizes");
  }
}

WeightSource::WeightSource(const std::string& spec, uint64_t seed, bool check_finite)
    : seed_(seed), check_finite_(check_finite) {
  if (!spec.empty() && spec != "random") store_ = TensorStore::open(spec);
}

WeightSource::~WeightSource() = default;
WeightSource::WeightSource(WeightSource&&) noexcept = default;
WeightSource& WeightSource::operator=(WeightSource&&) noexcept = default;

std::string WeightSource::description() const {
  return store_ ? store_->description() : "random weights (seed " + std::to_string(seed_) + ")";
}

bool WeightSource::contains(const std::string& name) const {
  return !store_ || store_->contains(name);
}

std::vector<float> WeightSource::load(const std::string& name, const std::vector<int64_t>& shape,
                                      const RandomInit& init) const {
  if (store_) {
    const TensorRef& t = store_->get(name);
    if (t.dtype != StDtype::F8E4M3) return read_as_f32(t, shape, check_finite_);
    // An FP8 checkpoint: the weight's scale sits beside it.
    const std::string scale = name + "_scale";
    if (!store_->contains(scale))
      fail(EG_ERR_INVALID_ARGUMENT,
           "tensor '" + name + "' in plugin.weights file '" + t.file +
               "' is F8_E4M3 but the checkpoint holds no '" + scale +
               "': an FP8 checkpoint needs each weight's scale beside it (the Model Optimizer "
               "and compressed-tensors layouts)");
    return read_e4m3_as_f32(t, store_->get(scale), shape, check_finite_);
  }
  int64_t elements = 1;
  for (int64_t d : shape) elements = checked_mul(elements, d, "the element count of " + name);
  const auto count = static_cast<size_t>(elements);
  std::vector<float> out(count);
  const uint64_t stream = hash_name(name);
  auto fill = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      out[i] = init.kind == RandomInit::Kind::Constant
                   ? static_cast<float>(init.mean)
                   : static_cast<float>(init.mean + init.std * normal01(seed_, stream, i));
  };
  // Every value is a function of its index alone, so threads give the same
  // tensor; a 7B tower's 670M values take seconds on one core.
  const size_t threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), count / (1u << 18) + 1);
  std::vector<std::thread> pool;
  const size_t chunk = (count + threads - 1) / threads;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(fill, std::min(count, t * chunk), std::min(count, (t + 1) * chunk));
  fill(0, std::min(count, chunk));
  for (auto& th : pool) th.join();
  return out;
}

std::string WeightSource::qwen_visual_prefix() const {
  if (!is_random() && contains("model.visual.patch_embed.proj.weight")) return "model.visual.";
  return "visual.";
}

}  // namespace encoder_kit
