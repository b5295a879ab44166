// Where a kit plugin's model runs: its CPU model, or its CUDA model when the
// plugin is built with its kernels. A build without them names NoCuda as the
// CUDA model (CudaIfBuilt), so the plugin's backend compiles the same code
// either way: the CUDA branch of run() is discarded at compile time and a
// request for CUDA is refused before any weight is loaded. ModelBackend
// (model_backend.hpp) is the whole backend of a plugin with one forward.
#pragma once

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>

#include <encgraph/plugin_api.h>
#include <encgraph/sdk/host.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace encoder_kit {

// The CUDA model of a build without the kernels: never made.
struct NoCuda {};

// The plugin's CUDA model in a build with the kit's CUDA kernels, else NoCuda.
// encgraph_add_kit_plugin defines ENCODER_KIT_HAVE_CUDA for the model library
// and its users when it builds the CUDA sources; the CUDA model's header is
// plain C++, so a plugin includes it in every build and names
// CudaIfBuilt<CudaModel> without an #ifdef of its own.
#ifdef ENCODER_KIT_HAVE_CUDA
template <class CudaModel>
using CudaIfBuilt = CudaModel;
#else
template <class CudaModel>
using CudaIfBuilt = NoCuda;
#endif

template <class CudaModel>
inline constexpr bool kHasCuda = !std::is_same_v<CudaModel, NoCuda>;

// The devices a build with this CUDA model runs on (the plugin's identity).
template <class CudaModel>
inline constexpr uint32_t kDevicesOf = kHasCuda<CudaModel> ? (EG_DEVICE_CPU | EG_DEVICE_CUDA)
                                                           : EG_DEVICE_CPU;

// Where the CUDA products' tuned choices persist: the tuning_cache key, or
// "off" (in memory only) when tune_gemm is off.
inline std::string gemm_tuning_cache(bool tune_gemm, const std::string& tuning_cache) {
  return tune_gemm ? tuning_cache : std::string("off");
}

// The CUDA model's warning hook (the tuning cache's warnings): the host's log.
inline std::function<void(const std::string&)> host_warn() {
  return [](const std::string& message) { encgraph::sdk::host().warn(message); };
}

// `Cpu`: what the CPU path holds (weights or a model; default-constructible,
// movable). `Cuda`: the CUDA model, or NoCuda.
template <class Cpu, class Cuda>
class DeviceBackend {
 public:
  // Refuses CUDA in a build without the kernels, naming `plugin`; call it
  // before loading anything.
  DeviceBackend(const std::string& plugin, int32_t device) {
    if constexpr (!kHasCuda<Cuda>) {
      if (device == EG_DEVICE_CUDA)
        fail(EG_ERR_UNSUPPORTED,
             plugin + " was built without its CUDA kernels; use device = \"cpu\"");
    }
  }

  void hold_cpu(Cpu cpu) { cpu_ = std::move(cpu); }

  // Makes the CUDA model from `args` (a build without it refused CUDA above).
  template <class... Args>
  void make_cuda(Args&&... args) {
    if constexpr (kHasCuda<Cuda>) cuda_ = std::make_unique<Cuda>(std::forward<Args>(args)...);
  }

  // The weights `load()` returns (an error names o.config_path, where the
  // sizes came from), held as they are for the CPU, or made into the CUDA
  // model from (o, weights, device_index, plan, o's tuning cache, the host's
  // warnings) for CUDA.
  template <class Options, class Plan, class Load>
  void load_onto(int32_t device, const Options& o, int device_index, const Plan& plan,
                 Load&& load) {
    Cpu w = naming_config_on_failure(o.config_path, std::forward<Load>(load));
    if (device == EG_DEVICE_CPU) {
      hold_cpu(std::move(w));
      return;
    }
    make_cuda(o, w, device_index, plan, gemm_tuning_cache(o.tune_gemm, o.tuning_cache),
              host_warn());
  }

  // `on_cuda(Cuda&)` for a CUDA instance, else `on_cpu(Cpu&)`. Pass `on_cuda`
  // as a generic lambda (`[&](auto& m)`) so that a build with NoCuda never
  // instantiates it.
  template <class OnCpu, class OnCuda>
  decltype(auto) run(OnCpu&& on_cpu, OnCuda&& on_cuda) {
    if constexpr (kHasCuda<Cuda>) {
      if (cuda_) return on_cuda(*cuda_);
    }
    return on_cpu(cpu_);
  }
  template <class OnCpu, class OnCuda>
  decltype(auto) run(OnCpu&& on_cpu, OnCuda&& on_cuda) const {
    if constexpr (kHasCuda<Cuda>) {
      if (cuda_) return on_cuda(static_cast<const Cuda&>(*cuda_));
    }
    return on_cpu(cpu_);
  }

 private:
  Cpu cpu_{};                   // CPU instances
  std::unique_ptr<Cuda> cuda_;  // CUDA instances
};

}  // namespace encoder_kit
