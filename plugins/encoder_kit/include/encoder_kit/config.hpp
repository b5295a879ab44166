// The kit's configuration pieces on the SDK's reader (sdk::Config): the keys
// every model plugin shares (dtype, check_finite), the size keys that a
// checkpoint folder's config.json may also set, and bounds that name the key.
#pragma once

#include <encgraph/sdk/config.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace encoder_kit {

// What a model plugin computes in: f32 on the CPU, bf16 on CUDA.
enum class ComputeDtype { F32, BF16 };

// The `dtype` key ("f32"/"float32", "bf16"/"bfloat16"; default by `device`).
// Throws Error(INVALID_ARGUMENT) when the device's path does not compute in it.
ComputeDtype read_compute_dtype(encgraph::sdk::Config& config, int32_t device);

// The key check_finite (default true): whether a checkpoint's NaN or infinite
// weights are an error (see encoder_kit::WeightSource).
bool read_check_finite(encgraph::sdk::Config& config);

// What a CUDA forward computes its blocks' Linears in (the `precision` key):
// "bf16" (the default), or "fp8_linear": FP8 E4M3 products, the weights
// quantised per output channel at load and the activations per row inside
// the forward (encoder_kit/cuda/fp8.hpp). Refused on the CPU device, naming
// the fix; the model refuses a GPU without FP8 tensor cores.
enum class Precision { Bf16, Fp8Linear };
Precision read_precision(encgraph::sdk::Config& config, int32_t device);

// The options every kit plugin has besides its model's: how random weights
// are drawn, whether a checkpoint is checked, how the CUDA products are tuned.
// A plugin's Options derive from it.
struct RunOptions {
  uint64_t seed = 0;         // random weights and synthetic items
  bool check_finite = true;  // a checkpoint's NaN/Inf weights are an error
  // CUDA: time the matrix products' algorithms in each capture's warm-up. Off,
  // cuBLASLt's first heuristic choice is used: reproducible across instances
  // (timed picks can differ from run to run, and so can the last bits).
  bool tune_gemm = true;
  // CUDA: where tuned product algorithms persist between runs (keyed by GPU,
  // library versions and shapes): a folder, "off", or "" for the default
  // (plugin.tuning.cache_dir, else $XDG_CACHE_HOME/encgraph, else ~/.cache/encgraph).
  std::string tuning_cache;
};

// The keys seed (weights = "random": any 64-bit pattern, default 0),
// tune_gemm and tuning_cache (defaults: the options' own), in this order.
inline void read_seed_and_tuning(encgraph::sdk::Config& config, RunOptions& o) {
  o.seed = static_cast<uint64_t>(config.get<int64_t>("seed", 0));
  o.tune_gemm = config.get<bool>("tune_gemm", o.tune_gemm);
  o.tuning_cache = config.get<std::string>("tuning_cache", o.tuning_cache);
}

// Throws Error(INVALID_ARGUMENT) "<plugin>: <name> = <v> is outside [lo, hi]".
// Plugins bound every size so that the products they compute from it stay far
// inside 64 bits (and a typo is named, not allocated), whether the size came
// from a key, a default or a checkpoint's config.json.
void require_in_range(const std::string& plugin, const char* name, int64_t value, int64_t lo,
                      int64_t hi);

// A model's size checks under the plugin's name (each validate() starts one).
struct SizeChecks {
  std::string plugin;
  // require_in_range.
  void range(const char* name, int64_t value, int64_t lo, int64_t hi) const {
    require_in_range(plugin, name, value, lo, hi);
  }
  // Throws Error(INVALID_ARGUMENT) "<plugin>: <name> <value> is not a multiple
  // of <of_name> <of>".
  void multiple(const std::string& name, int64_t value, const std::string& of_name,
                int64_t of) const;
  // The ViT sizes every ViT plugin bounds alike: hidden_size [1, 65536],
  // num_hidden_layers and num_attention_heads [1, 1024], intermediate_size
  // [1, 262144], image_size [1, 16384], patch_size [1, 1024].
  void vit(int64_t hidden_size, int64_t num_hidden_layers, int64_t num_attention_heads,
           int64_t intermediate_size, int64_t image_size, int64_t patch_size) const;
};

// Keys that may also come from a checkpoint folder's config.json: a key
// overrides the value read from the file, except that a key contradicting the
// folder's OWN config.json (folder_config non-empty: the weights beside it
// have its sizes) is an error naming both. With no folder config (empty), keys
// simply override. Values are left unbounded here: the model's validate()
// bounds them wherever they came from.
class CheckpointKeys {
 public:
  CheckpointKeys(encgraph::sdk::Config& config, std::string folder_config)
      : config_(config), folder_config_(std::move(folder_config)) {}
  void dim(const char* key, int64_t& value) const;
  void int_list(const char* key, std::vector<int64_t>& value) const;

 private:
  encgraph::sdk::Config& config_;
  std::string folder_config_;
};

}  // namespace encoder_kit
