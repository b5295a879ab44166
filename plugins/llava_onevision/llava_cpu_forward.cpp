// The encoder on the CPU in f32: what CI runs, and the CUDA path's reference.
// The tower is plugins/siglip's CPU forward on the same two buffers.
#include "llava_weights.hpp"

#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/workspace_carver.hpp>

#include <cstring>
#include <string>

namespace llava_onevision {
namespace {

namespace k = encoder_kit::cpu;

struct Activations {
  float* features;   // [tower rows, hidden]: hidden_states[feature_layer]
  float* mid;        // [tower rows, text_hidden]: gelu(linear_1)
  float* projected;  // [tower rows, text_hidden]
  void* tower;       // the SigLIP forward's own workspace
  size_t tower_bytes;
  size_t total_bytes;
};

Activations carve(const Options& o, const Weights& w, const Capacity& cap, char* base) {
  const ModelConfig& c = o.model;
  const size_t r = static_cast<size_t>(cap.tower_rows(c));
  Activations a{};
  encoder_kit::WorkspaceCarver<char> ws(base, 256);
  a.features = reinterpret_cast<float*>(ws.take(r * static_cast<size_t>(c.vision.hidden_size) * 4));
  a.mid = reinterpret_cast<float*>(ws.take(r * static_cast<size_t>(c.text_hidden_size) * 4));
  a.projected = reinterpret_cast<float*>(ws.take(r * static_cast<size_t>(c.text_hidden_size) * 4));
  a.tower_bytes = siglip::cpu_workspace_bytes(w.tower_options, {cap.tiles, cap.tower_rows(c)});
  a.tower = ws.take(a.tower_bytes);
  a.total_bytes = ws.size();
  return a;
}

}  // namespace

size_t cpu_workspace_bytes(const Options& o, const Weights& w, const Capacity& cap) {
  return carve(o, w, cap, nullptr).total_bytes;
}

void cpu_forward(const Options& o, const Weights& w, const Capacity& cap, const eg_tensor* buffers,
                 float* output, void* workspace, size_t workspace_bytes) {
  const ModelConfig& c = o.model;
  const Activations a = carve(o, w, cap, static_cast<char*>(workspace));
  if (a.total_bytes > workspace_bytes)
    encoder_kit::fail(
        EG_ERR_INVALID_ARGUMENT,
        "llava_onevision: workspace of " + std::to_string(workspace_bytes) + " bytes is too small");
  const auto* src = static_cast<const int32_t*>(buffers[kPackSrc].data);
  const auto* weight = static_cast<const float*>(buffers[kPackWeight].data);
  check_plan(o, cap, src, weight);

  const int64_t rows = cap.tower_rows(c), d = c.vision.hidden_size, t = c.text_hidden_size;
  siglip::OutputPtrs tower_out;
  tower_out.last_hidden_state = a.features;
  siglip::cpu_forward(w.tower_options, w.tower, {cap.tiles, rows}, buffers, tower_out, a.tower,
                      a.tower_bytes);
  k::linear(a.features, rows, d, w.proj1_w.data(), w.proj1_b.data(), t, a.mid);
  k::gelu_erf(a.mid, static_cast<size_t>(rows * t));
  k::linear(a.mid, rows, t, w.proj2_w.data(), w.proj2_b.data(), t, a.projected);

  // The packing: each output row a weighted sum of projected rows or the newline.
  const int64_t outs = cap.out_rows(c);
  for (int64_t r = 0; r < outs; ++r) {
    float* y = output + r * t;
    std::memset(y, 0, static_cast<size_t>(t) * 4);
    for (int tap = 0; tap < kTaps; ++tap) {
      const int32_t s = src[r * kTaps + tap];
      const float wt = weight[r * kTaps + tap];
      if (wt == 0.0f) continue;
      const float* x = s == kNewlineRow ? w.newline.data() : a.projected + s * t;
      for (int64_t e = 0; e < t; ++e) y[e] += wt * x[e];
    }
  }
}

}  // namespace llava_onevision
