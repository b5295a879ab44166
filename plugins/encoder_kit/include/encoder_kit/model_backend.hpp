// A kit plugin's backend from a few traits: the rule every kit plugin with one
// forward over CPU weights follows, written once. It refuses CUDA in a build
// without the kernels before anything loads, logs what it loads, loads the
// weights onto the CPU or into the CUDA model, and routes workspace_bytes()
// and forward() to the CPU functions or the CUDA model.
//
// Traits (a struct in the plugin, beside its model class):
//   using Types = BackendTypes<Options, Weights, Capacity, CudaIfBuilt<CudaModel>>;
//   static constexpr const char* kName;          // the plugin, as refusals name it
//   static std::string loading(const Options&);  // the load line's "(...)"
//   load(o, source) -> Weights                   // e.g. = &plugin::load_weights
//   cpu_workspace_bytes(o, cap), or (o, w, cap)  // where the weights size the scratch
//   cpu_forward(o, w, cap, buffers, output, workspace, workspace_bytes)
// The three functions may be function pointers (`static constexpr auto load =
// &plugin::load_weights;`). Options carries RunOptions (seed, check_finite,
// tune_gemm, tuning_cache) and config_path; the CUDA model is made from
// (o, w, device_index, largest, tuning cache, warnings) as in DeviceBackend.
#pragma once

#include <encoder_kit/device_backend.hpp>
#include <encoder_kit/weights.hpp>

#include <encgraph/plugin_api.h>
#include <encgraph/sdk/host.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace encoder_kit {

// The types a ModelBackend's traits name, in one line.
template <class OptionsT, class WeightsT, class CapacityT, class CudaT>
struct BackendTypes {
  using Options = OptionsT;
  using Weights = WeightsT;    // what the CPU path holds
  using Capacity = CapacityT;  // one graph's size
  using Cuda = CudaT;          // the CUDA model, or NoCuda (CudaIfBuilt)
};

// The output as the CPU forward takes it: a single untyped output holds f32
// rows there (bf16 on CUDA); a plugin's own output struct passes as it is.
template <class Output>
decltype(auto) cpu_output(const Output& output) {
  if constexpr (std::is_same_v<Output, void*>)
    return static_cast<float*>(output);
  else
    return (output);
}

template <class Traits>
class ModelBackend {
 public:
  using Types = typename Traits::Types;
  using Options = typename Types::Options;
  using Weights = typename Types::Weights;
  using Capacity = typename Types::Capacity;
  using Cuda = typename Types::Cuda;

  // The devices this build runs on (the plugin's identity).
  static constexpr uint32_t kDevices = kDevicesOf<Cuda>;

  // Loads the weights (`weights`: a checkpoint path, or "" / "random") onto
  // `device`, logging what it loads; `largest`: the largest graph's capacity,
  // which the CUDA model plans its products for. Throws Error(UNSUPPORTED)
  // for CUDA in a build without the kernels, before the log line or any load.
  ModelBackend(const Options& o, const std::string& weights, int32_t device, int32_t device_index,
               const Capacity& largest)
      : opt_(o), device_(Traits::kName, device) {
    const WeightSource source(weights.empty() ? "random" : weights, o.seed, o.check_finite);
    encgraph::sdk::host().info("loading " + source.description() + " (" + Traits::loading(o) + ")");
    device_.load_onto(device, o, device_index, largest, [&] { return Traits::load(o, source); });
  }

  size_t workspace_bytes(const Capacity& cap) const {
    return device_.run(
        [&](const Weights& w) -> size_t {
          if constexpr (std::is_invocable_v<decltype(Traits::cpu_workspace_bytes), const Options&,
                                            const Weights&, const Capacity&>)
            return Traits::cpu_workspace_bytes(opt_, w, cap);
          else
            return Traits::cpu_workspace_bytes(opt_, cap);
        },
        [&](const auto& m) { return m.workspace_bytes(cap); });
  }

  // `buffers` in the plugin's buffer order; `output`: the plugin's output
  // pointer(s), as its CUDA model takes them. `tune`: the CUDA products time
  // their algorithms at this size first (the graph path's warm-ups ask).
  template <class Output>
  void forward(const Capacity& cap, const eg_tensor* buffers, const Output& output, void* workspace,
               size_t workspace_bytes, void* stream, bool tune) {
    device_.run(
        [&](const Weights& w) {
          Traits::cpu_forward(opt_, w, cap, buffers, cpu_output(output), workspace,
                              workspace_bytes);
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
