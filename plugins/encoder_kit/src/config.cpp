#include <encoder_kit/config.hpp>
#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>

namespace encoder_kit {

ComputeDtype read_compute_dtype(encgraph::sdk::Config& config, int32_t device) {
  const std::string& plugin = config.plugin();
  const std::string dtype =
      config.get<std::string>("dtype", device == EG_DEVICE_CUDA ? "bf16" : "f32");
  ComputeDtype out;
  if (dtype == "f32" || dtype == "float32")
    out = ComputeDtype::F32;
  else if (dtype == "bf16" || dtype == "bfloat16")
    out = ComputeDtype::BF16;
  else
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": dtype '" + dtype + "' is not f32 or bf16");
  if (device == EG_DEVICE_CPU && out != ComputeDtype::F32)
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": the CPU path computes in f32; set dtype = \"f32\"");
  if (device == EG_DEVICE_CUDA && out != ComputeDtype::BF16)
    fail(EG_ERR_INVALID_ARGUMENT,
         plugin + ": the CUDA path computes in bf16; set dtype = \"bf16\"");
  return out;
}

Precision read_precision(encgraph::sdk::Config& config, int32_t device) {
  const std::string v = config.get_choice("precision", "bf16", {"bf16", "fp8_linear"});
  if (v == "bf16") return Precision::Bf16;
  if (device != EG_DEVICE_CUDA)
    fail(EG_ERR_INVALID_ARGUMENT,
         config.plugin() +
             ": precision = \"fp8_linear\" runs on CUDA only (the CPU path computes in f32); "
             "set device = \"cuda\" or drop the key");
  return Precision::Fp8Linear;
}

bool read_check_finite(encgraph::sdk::Config& config) {
  return config.get<bool>("check_finite", true);
}

void require_in_range(const std::string& plugin, const char* name, int64_t value, int64_t lo,
                      int64_t hi) {
  if (value < lo || value > hi)
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + name + " = " + std::to_string(value) +
                                      " is outside [" + std::to_string(lo) + ", " +
                                      std::to_string(hi) + "]");
}

void SizeChecks::multiple(const std::string& name, int64_t value, const std::string& of_name,
                          int64_t of) const {
  if (value % of != 0)
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + name + " " + std::to_string(value) +
                                      " is not a multiple of " + of_name + " " +
                                      std::to_string(of));
}

void SizeChecks::vit(int64_t hidden_size, int64_t num_hidden_layers, int64_t num_attention_heads,
                     int64_t intermediate_size, int64_t image_size, int64_t patch_size) const {
  range("hidden_size", hidden_size, 1, 65536);
  range("num_hidden_layers", num_hidden_layers, 1, 1024);
  range("num_attention_heads", num_attention_heads, 1, 1024);
  range("intermediate_size", intermediate_size, 1, 262144);
  range("image_size", image_size, 1, 16384);
  range("patch_size", patch_size, 1, 1024);
}

void CheckpointKeys::dim(const char* key, int64_t& value) const {
  const int64_t set = config_.get<int64_t>(key, value);
  if (!folder_config_.empty() && config_.has(key))
    require_agree(config_.plugin(), "config.json '" + folder_config_ + "' vision_config." + key,
                  value, std::string("[plugin.config] ") + key, set);
  value = set;
}

void CheckpointKeys::int_list(const char* key, std::vector<int64_t>& value) const {
  std::vector<int64_t> set = config_.get<std::vector<int64_t>>(key, value);
  if (!folder_config_.empty() && set != value)
    fail(EG_ERR_INVALID_ARGUMENT,
         config_.plugin() + ": [plugin.config] " + key + " contradicts config.json '" +
             folder_config_ + "' vision_config." + key + ": they must agree (remove the key)");
  value = std::move(set);
}

}  // namespace encoder_kit
