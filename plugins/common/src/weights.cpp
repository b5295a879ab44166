#include <egk/random.hpp>
#include <egk/safetensors.hpp>
#include <egk/weights.hpp>

#include <algorithm>
#include <thread>

namespace egk {

WeightSource::WeightSource(const std::string& spec, uint64_t seed) : seed_(seed) {
  if (!spec.empty() && spec != "random") store_ = TensorStore::open(spec);
}

WeightSource::~WeightSource() = default;
WeightSource::WeightSource(WeightSource&&) noexcept = default;
WeightSource& WeightSource::operator=(WeightSource&&) noexcept = default;

std::string WeightSource::description() const {
  return store_ ? store_->description() : "random weights (seed " + std::to_string(seed_) + ")";
}

std::vector<float> WeightSource::load(const std::string& name, const std::vector<int64_t>& shape,
                                      const RandomInit& init) const {
  if (store_) return read_as_f32(store_->get(name), shape);
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
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

}  // namespace egk
