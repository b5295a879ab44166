// Building an eg_model_info from C++ (names owned, counts checked, the 1.0
// fields derived from the primary output), and the struct_size-safe copy the
// ABI requires: a plugin writes only up to the struct_size the runtime set.
//
//   sdk::ModelInfo info;
//   info.path("default", "patches")
//       .buffer("patches", EG_DTYPE_F32)
//       .buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST)
//       .output("patch_means", 4, EG_DTYPE_F32);
#pragma once

#include <encgraph/sdk/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace encgraph::sdk {

// Copies `info` into the runtime's `out`: min(sizeof(eg_model_info),
// out->struct_size) bytes, never out->struct_size itself. A 1.0 runtime (488
// bytes) thus never sees a byte past its struct; a later one keeps zeros for
// fields this header does not know.
inline void write_model_info(eg_model_info* out, const eg_model_info& info) noexcept {
  if (!out) return;
  const size_t skip = offsetof(eg_model_info, reserved);  // the runtime's struct_size stays
  const size_t n = std::min<size_t>(sizeof(eg_model_info), out->struct_size);
  if (n <= skip) return;
  std::memcpy(reinterpret_cast<char*>(out) + skip, reinterpret_cast<const char*>(&info) + skip,
              n - skip);
}

struct PathOptions {
  int64_t min_token_budget = 0;  // 0: the runtime's budgets as they are
  bool allow_zero_tokens = false;
};

// Owns every string and key array the raw struct points to, so it is neither
// copied nor moved: keep it in the instance (it must live until destroy).
class ModelInfo {
 public:
  ModelInfo() { info_.struct_size = sizeof(eg_model_info); }
  ModelInfo(const ModelInfo&) = delete;
  ModelInfo& operator=(const ModelInfo&) = delete;

  // A path and the unit its budgets and path_tokens count ("patches", "tiles").
  ModelInfo& path(const std::string& name, const std::string& unit, PathOptions options = {}) {
    const int32_t p = info_.num_paths;
    if (p >= EG_MAX_PATHS) too_many("paths", EG_MAX_PATHS);
    info_.paths[p].name = keep(name);
    info_.paths[p].min_token_budget = options.min_token_budget;
    info_.paths[p].allow_zero_tokens = options.allow_zero_tokens ? 1 : 0;
    info_.path_units[p] = keep(unit);
    info_.num_paths = p + 1;
    return *this;
  }

  // A graph input buffer (the same list serves every path; shapes may differ by path).
  ModelInfo& buffer(const std::string& name, eg_dtype dtype,
                    eg_padding_logic padding = EG_PAD_ZERO) {
    const int32_t b = info_.num_buffers;
    if (b >= EG_MAX_BUFFERS) too_many("buffers", EG_MAX_BUFFERS);
    info_.buffers[b] = eg_buffer_info{keep(name), dtype, padding};
    info_.num_buffers = b + 1;
    return *this;
  }

  // A named output; the first is the primary one (rows_per_item must be 0:
  // the item's output_tokens rows) and sets out_hidden_size and out_dtype.
  ModelInfo& output(const std::string& name, int64_t width, eg_dtype dtype,
                    int64_t rows_per_item = 0) {
    const int32_t o = info_.num_outputs;
    if (o >= EG_MAX_OUTPUTS) too_many("outputs", EG_MAX_OUTPUTS);
    if (o == 0 && rows_per_item != 0)
      fail(EG_ERR_INTERNAL, "model info: the primary output '" + name +
                                "' must have rows_per_item 0 (the item's output_tokens)");
    if (width <= 0 || rows_per_item < 0)
      fail(EG_ERR_INTERNAL,
           "model info: output '" + name + "' needs width > 0, rows_per_item >= 0");
    info_.outputs[o] = eg_output_info{keep(name), width, dtype, 0, rows_per_item};
    if (o == 0) {
      info_.out_hidden_size = width;
      info_.out_dtype = dtype;
    }
    info_.num_outputs = o + 1;
    return *this;
  }

  // An extra discrete graph key (only with one path).
  ModelInfo& capture_axis(const std::string& name, const std::vector<int64_t>& keys) {
    const int32_t a = info_.num_capture_axes;
    if (a >= EG_MAX_CAPTURE_AXES) too_many("capture axes", EG_MAX_CAPTURE_AXES);
    if (keys.empty()) fail(EG_ERR_INTERNAL, "model info: capture axis '" + name + "' has no keys");
    keys_.push_back(keys);
    info_.capture_axes[a] =
        eg_capture_axis{keep(name), static_cast<int32_t>(keys.size()), 0, keys_.back().data()};
    info_.num_capture_axes = a + 1;
    return *this;
  }

  ModelInfo& max_frames_per_video(int32_t frames) {
    info_.max_frames_per_video = frames;
    return *this;
  }

  // The description, checked: a bug here fails `create` with a clear message.
  const eg_model_info& raw() const {
    if (info_.num_paths < 1) fail(EG_ERR_INTERNAL, "model info: declare at least one path");
    if (info_.num_outputs < 1) fail(EG_ERR_INTERNAL, "model info: declare at least one output");
    if (info_.num_capture_axes > 0 && info_.num_paths > 1)
      fail(EG_ERR_INTERNAL, "model info: capture axes need a model with one path");
    return info_;
  }
  int32_t num_paths() const { return info_.num_paths; }
  int32_t num_buffers() const { return info_.num_buffers; }
  int32_t num_outputs() const { return info_.num_outputs; }
  const char* buffer_name(int32_t b) const {
    return b >= 0 && b < info_.num_buffers ? info_.buffers[b].name : "?";
  }
  const eg_output_info& output_info(int32_t o) const { return info_.outputs[o]; }

 private:
  [[noreturn]] static void too_many(const char* what, int max) {
    fail(EG_ERR_INTERNAL,
         std::string("model info: more ") + what + " than the ABI's " + std::to_string(max));
  }
  const char* keep(const std::string& s) {
    names_.push_back(s);
    return names_.back().c_str();
  }

  eg_model_info info_{};
  std::deque<std::string> names_;  // a deque: push_back never moves earlier strings
  std::deque<std::vector<int64_t>> keys_;
};

}  // namespace encgraph::sdk
