// A model's parameters in one device allocation: add() each host array with
// the pointer that receives its place (bf16, or f32 where a kernel reads f32),
// then upload() once: one host image, one copy, every place 256-byte aligned.
// The allocation lives as long as the object. For targets that link the plugin
// kit (encgraph_encoder_kit) besides encgraph_encoder_kit_cuda.
#pragma once

#include "kernels.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace encoder_kit::cuda {

class DeviceWeights {
 public:
  DeviceWeights() = default;
  ~DeviceWeights();  // frees the allocation, logging (not throwing) a failure
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  // An array the caller keeps alive until upload(): read there, not copied.
  void add(const bf16** dst, const std::vector<float>& values) { plan(dst, &values, false); }
  void add(const float** dst, const std::vector<float>& values) { plan(dst, &values, true); }
  // A temporary (a concatenation, a padded copy): kept here until upload().
  void add(const bf16** dst, std::vector<float>&& values) { plan(dst, &keep(values), false); }
  void add(const float** dst, std::vector<float>&& values) { plan(dst, &keep(values), true); }

  // A [rows, cols] Linear weight in FP8 E4M3, quantised here per output
  // channel (encoder_kit/fp8.hpp's quantize_rows_e4m3): its codes, and its
  // rows' scales as f32. Throws encoder_kit::Error naming `name` for a value
  // that is not finite.
  void add_e4m3(const uint8_t** codes, const float** scales, const std::vector<float>& w,
                int64_t rows, const std::string& name);

  // Allocates, converts and copies every array added, then sets each pointer.
  // Throws encoder_kit::Error (OUT_OF_MEMORY, DEVICE) led by `who`
  // ("siglip CUDA"). Once only.
  void upload(const std::string& who);

 private:
  struct Entry {
    const void** dst;
    const std::vector<float>* values;  // null: bytes
    bool f32;
    const std::vector<uint8_t>* bytes = nullptr;  // copied as they are
  };
  template <class T>
  void plan(const T** dst, const std::vector<float>* values, bool f32) {
    plan_.push_back({reinterpret_cast<const void**>(dst), values, f32});
  }
  const std::vector<float>& keep(std::vector<float>& values) {
    return kept_.emplace_back(std::move(values));
  }

  std::vector<Entry> plan_;
  std::deque<std::vector<float>> kept_;  // a deque: added arrays never move
  std::deque<std::vector<uint8_t>> kept_bytes_;
  void* device_ = nullptr;
  std::string who_;
};

}  // namespace encoder_kit::cuda
