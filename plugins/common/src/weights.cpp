#include <egk/random.hpp>
#include <egk/safetensors.hpp>
#include <egk/weights.hpp>

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
  for (size_t i = 0; i < count; ++i)
    out[i] = init.kind == RandomInit::Kind::Constant
                 ? static_cast<float>(init.mean)
                 : static_cast<float>(init.mean + init.std * normal01(seed_, stream, i));
  return out;
}

}  // namespace egk
