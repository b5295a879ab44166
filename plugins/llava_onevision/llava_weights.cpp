#include "llava_weights.hpp"

#include <encoder_kit/checked.hpp>

#include <cmath>
#include <string>

namespace llava_onevision {

using encoder_kit::RandomInit;
using encoder_kit::random_init::kBias;
using encoder_kit::random_init::matrix;

std::string resolve_prefix(const Options& o, const encoder_kit::WeightSource& source) {
  if (o.weight_prefix != "auto") return o.weight_prefix;
  if (source.contains("model.image_newline")) return "model.";
  if (source.contains("image_newline")) return "";
  return "model.";
}

// The tower sits under "vision_tower.vision_model." when it is saved as a
// SiglipVisionModel (the released files) and under "vision_tower." when the
// saving library holds the bare SiglipVisionTransformer; the patch embedding
// says which.
std::string resolve_tower_prefix(const std::string& prefix,
                                 const encoder_kit::WeightSource& source) {
  const std::string nested = prefix + "vision_tower.vision_model.";
  const std::string flat = prefix + "vision_tower.";
  const std::string probe = "embeddings.patch_embedding.weight";
  if (!source.contains(nested + probe) && source.contains(flat + probe)) return flat;
  return nested;
}

Weights load_weights(const Options& o, const encoder_kit::WeightSource& source) {
  const ModelConfig& m = o.model;
  const int64_t d = m.vision.hidden_size, t = m.text_hidden_size;
  const encoder_kit::CheckedCount n{"llava_onevision: the projector's parameter count"};
  encoder_kit::require_weights_fit(
      n.sum({n.mul({t, d}), n.mul({t, t}), n.mul({3, t})}),
      "llava_onevision: the projector (text_hidden_size " + std::to_string(t) + ")");
  const std::string prefix = resolve_prefix(o, source);
  Weights w;
  w.tower_options = o.tower(resolve_tower_prefix(prefix, source));
  w.tower = siglip::load_weights(w.tower_options, source);
  const encoder_kit::PrefixedReader read{source, prefix};
  const std::string p = "multi_modal_projector.";
  w.proj1_w = read(p + "linear_1.weight", {t, d}, matrix(d));
  w.proj2_w = read(p + "linear_2.weight", {t, t}, matrix(t));
  const std::vector<float> zeros(static_cast<size_t>(t), 0.0f);
  w.proj1_b = m.projector_bias ? read(p + "linear_1.bias", {t}, kBias) : zeros;
  w.proj2_b = m.projector_bias ? read(p + "linear_2.bias", {t}, kBias) : zeros;
  w.newline =
      read("image_newline", {t}, RandomInit::normal(1.0 / std::sqrt(static_cast<double>(t))));
  return w;
}

}  // namespace llava_onevision
