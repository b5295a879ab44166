// A kit plugin's backend: the rule every kit plugin with one forward over CPU
// weights follows, written once. It refuses CUDA in a build without the
// kernels before anything loads, logs what it loads, loads the weights onto
// the CPU or into the CUDA model, and routes workspace_bytes() and forward()
// to the CPU functions or the CUDA model.
//
// A plugin names it with its options and its CUDA model,
//   using Backend = encoder_kit::ModelBackend<Options, encoder_kit::CudaIfBuilt<CudaModel>>;
// and its namespace (the one Options is in; found by argument-dependent lookup)
// declares the CPU side:
//   Weights load_weights(const Options&, const encoder_kit::WeightSource&);
//   size_t cpu_workspace_bytes(const Options&, const Capacity&);  // or
//   size_t cpu_workspace_bytes(const Options&, const Weights&, const Capacity&);
//   void cpu_forward(const Options&, const Weights&, const Capacity&, const eg_tensor* buffers,
//                    Output output, void* workspace, size_t workspace_bytes);
// where Output is the plugin's output struct, or float* where the CUDA model
// takes one void* output (cpu_output).
// Options carries RunOptions (seed, check_finite, tune_gemm, tuning_cache) and
// config_path. The CUDA model is made from (o, weights, device_index, largest,
// tuning cache, warnings) as DeviceBackend::load_onto says, and has
// workspace_bytes(cap) and forward(cap, buffers, output, workspace,
// workspace_bytes, stream, tune).
#pragma once

#include <encoder_kit/device_backend.hpp>
#include <encoder_kit/weights.hpp>

#include <encgraph/plugin_api.h>
#include <encgraph/sdk/host.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace encoder_kit {

// The output as the CPU forward takes it: a single untyped output holds f32
// rows there (bf16 on CUDA); a plugin's own output struct passes as it is.
template <class Output>
decltype(auto) cpu_output(const Output& output) {
  if constexpr (std::is_same_v<Output, void*>)
    return static_cast<float*>(output);
  else
    return (output);
}

// The load line's words for a ViT: "6 of 12 layers, hidden 768, 196 tokens
// per image" (`unit`: what one sequence is, e.g. "image" or "tile").
inline std::string describe_vit(int64_t layers_run, int64_t layers, int64_t hidden, int64_t tokens,
                                const std::string& unit) {
  return std::to_string(layers_run) + " of " + std::to_string(layers) + " layers, hidden " +
         std::to_string(hidden) + ", " + std::to_string(tokens) + " tokens per " + unit;
}

template <class Options, class Cuda>
class ModelBackend {
 public:
  // What the CPU path holds: what the plugin's load_weights returns.
  using Weights =
      decltype(load_weights(std::declval<const Options&>(), std::declval<const WeightSource&>()));

  // The devices this build runs on (the plugin's identity).
  static constexpr uint32_t kDevices = kDevicesOf<Cuda>;

  // Loads the weights (`weights`: a checkpoint path, or "" / "random") onto
  // `device`, logging "loading <source> (<model_note>)"; `plugin`: the
  // plugin's name, which the refusal names; `largest`: the largest graph's
  // capacity, which the CUDA model plans its products for. Throws
  // Error(UNSUPPORTED) for CUDA in a build without the kernels, before the
  // log line or any load.
  template <class Capacity>
  ModelBackend(const std::string& plugin, const Options& o, const std::string& model_note,
               const std::string& weights, int32_t device, int32_t device_index,
               const Capacity& largest)
      : opt_(o), device_(plugin, device) {
    const WeightSource source(weights.empty() ? "random" : weights, o.seed, o.check_finite);
    encgraph::sdk::host().info("loading " + source.description() + " (" + model_note + ")");
    device_.load_onto(device, o, device_index, largest, [&] { return load_weights(o, source); });
  }

  template <class Capacity>
  size_t workspace_bytes(const Capacity& cap) const {
    return device_.run(
        [&](const Weights& w) -> size_t {
          // Some plugins' CPU scratch depends on the weights' shapes.
          if constexpr (requires { cpu_workspace_bytes(opt_, w, cap); })
            return cpu_workspace_bytes(opt_, w, cap);
          else
            return cpu_workspace_bytes(opt_, cap);
        },
        [&](const auto& m) { return m.workspace_bytes(cap); });
  }

  // `buffers` in the plugin's buffer order; `output`: the plugin's output
  // pointer(s), as its CUDA model takes them. `tune`: the CUDA products time
  // their algorithms at this size first (the graph path's warm-ups ask).
  template <class Capacity, class Output>
  void forward(const Capacity& cap, const eg_tensor* buffers, const Output& output, void* workspace,
               size_t workspace_bytes, void* stream, bool tune) {
    device_.run(
        [&](const Weights& w) {
          cpu_forward(opt_, w, cap, buffers, cpu_output(output), workspace, workspace_bytes);
        },
        [&](auto& m) {
          m.forward(cap, buffers, output, workspace, workspace_bytes, stream, tune);
        });
  }

 private:
  const Options& opt_;  // the plugin's: it outlives its backend
  DeviceBackend<Weights, Cuda> device_;
};

}  // namespace encoder_kit
