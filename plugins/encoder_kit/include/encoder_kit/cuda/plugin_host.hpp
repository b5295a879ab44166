// Host-side helpers of the model plugins' CUDA paths: workspace carving and
// turning failed CUDA calls into encoder_kit::Error. Header-only, and only for
// targets that link the plugin kit (encgraph_encoder_kit, for
// encoder_kit/error.hpp) besides encgraph_encoder_kit_cuda; the kernel sources
// report through check.hpp instead. No copy helpers: capture inputs are
// host-staged (ABI 1.1), so a plugin's capture path holds no device copies.
#pragma once

#include "form_timing.hpp"
#include "kernels.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/tuning_cache.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace encoder_kit::cuda {

// Buffers carved from one workspace start on this boundary, as a separate
// cudaMalloc of each would.
inline constexpr size_t kWorkspaceAlign = 256;

inline size_t align_up(size_t n) {
  return (n + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// Throws for a failed kit call (a kernels.hpp status): OUT_OF_MEMORY for an
// allocation, DEVICE otherwise; `who` (e.g. "siglip CUDA") leads the message.
inline void throw_on_kit_failure(const char* who, int rc, const char* what) {
  if (rc != 0)
    encoder_kit::fail(rc == cudaErrorMemoryAllocation ? EG_ERR_OUT_OF_MEMORY : EG_ERR_DEVICE,
                      std::string(who) + ": " + what + ": " + error_string(rc) + " (" +
                          last_error_detail() + ")");
}

// The same for a CUDA runtime call.
inline void throw_on_cuda_error(const char* who, cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    encoder_kit::fail(e == cudaErrorMemoryAllocation ? EG_ERR_OUT_OF_MEMORY : EG_ERR_DEVICE,
                      std::string(who) + ": " + what + ": " + cudaGetErrorString(e));
}

// A LayerNorm (gamma, beta over cols) folded into the product after it
// (fold_layer_norm), as the device holds it: the [rows, cols] weights w and
// the bias b (rows past w's and b's own are zero: padding) go into a host
// image as bf16 at dst_w and dst_b, and the sums of each folded bf16 row into
// sums[rows] (layer_norm_linear_gelu_tanh_bf16's col_sums).
inline void fold_layer_norm_bf16(const std::vector<float>& w, const std::vector<float>& b,
                                 int64_t rows, int64_t cols, const std::vector<float>& gamma,
                                 const std::vector<float>& beta, uint16_t* dst_w, uint16_t* dst_b,
                                 float* sums) {
  std::vector<float> fw(static_cast<size_t>(rows * cols), 0.0f),
      fb(static_cast<size_t>(rows), 0.0f);
  std::copy(w.begin(), w.end(), fw.begin());
  std::copy(b.begin(), b.end(), fb.begin());
  fold_layer_norm(fw.data(), fb.data(), sums, rows, cols, gamma.data(), beta.data(),
                  [](float v) { return bf16_to_f32(f32_to_bf16(v)); });
  for (float f : fw) *dst_w++ = f32_to_bf16(f);
  for (float f : fb) *dst_b++ = f32_to_bf16(f);
}

// The fastest of `names`' forms of one layer step, run(form index) each, at
// one size: the choice stored in the tuning cache (may be null) under `key`,
// or timed here as replays of CUDA graphs in alternating rounds (time_forms:
// eager runs would time the host's launches, where cuBLASLt's cost more, and
// had picked one image's norm1 + qkv form the wrong way round). A form after
// the first must be 2% faster to win (forms that differ by 2-5% must not flip
// between starts on timing noise); one that fails to run or to capture is
// out (the graphs could not hold it). choose_fastest stores the choice; the
// caller saves the cache. `who` leads a failure's message.
inline size_t choose_form(TuningCache* cache, const std::string& key,
                          const std::vector<std::string>& names,
                          const std::function<void(size_t)>& run, cudaStream_t stream,
                          const char* who) {
  constexpr int kRuns = 4, kRounds = 3;
  constexpr double kMargin = 1.02;
  std::vector<double> ms;  // every form's, measured on choose_fastest's first call
  auto measure_all = [&] {
    run(0);  // the first form's failure is the model's, reported as such
    FormTimes times;
    throw_on_kit_failure(who,
                         time_forms(
                             names.size(),
                             [&](size_t f) {
                               try {
                                 run(f);
                                 return 0;
                               } catch (...) {  // out of the running (inside a capture: ends it)
                                 return static_cast<int>(cudaErrorUnknown);
                               }
                             },
                             stream, kRuns, kRounds, times),
                         "timing a layer's kernel forms");
    for (size_t f = 0; f < names.size(); ++f)
      ms.push_back(times.best_ms[f] >= 0.0f && times.captured[f]
                       ? times.best_ms[f] * (f == 0 ? 1.0 : kMargin)
                       : std::numeric_limits<double>::infinity());
  };
  auto time_ms = [&](size_t f) {
    if (ms.empty()) measure_all();
    return ms[f];
  };
  return choose_fastest(cache, key, names, time_ms);
}

}  // namespace encoder_kit::cuda
