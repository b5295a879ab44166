#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/plugin_host.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/fp8.hpp>
#include <encoder_kit/numeric.hpp>

#include <cstdio>
#include <cstring>

namespace encoder_kit::cuda {

DeviceWeights::~DeviceWeights() {
  if (!device_) return;
  const cudaError_t e = cudaFree(device_);
  if (e != cudaSuccess)
    std::fprintf(stderr, "%s: freeing weights: %s\n", who_.c_str(), cudaGetErrorString(e));
}

void DeviceWeights::add_e4m3(const uint8_t** codes, const float** scales,
                             const std::vector<float>& w, int64_t rows, const std::string& name) {
  const int64_t cols = rows > 0 ? static_cast<int64_t>(w.size()) / rows : 0;
  if (rows <= 0 || cols * rows != static_cast<int64_t>(w.size()))
    encoder_kit::fail(EG_ERR_INTERNAL, name + ": " + std::to_string(w.size()) + " values are not " +
                                           std::to_string(rows) + " rows");
  E4m3Rows q;
  try {
    q = quantize_rows_e4m3(w.data(), rows, cols);
  } catch (const encoder_kit::Error& e) {
    encoder_kit::fail(e.status(), name + ": " + e.what());
  }
  plan_.push_back({reinterpret_cast<const void**>(codes), nullptr, false,
                   &kept_bytes_.emplace_back(std::move(q.codes))});
  add(scales, std::move(q.scales));
}

void DeviceWeights::upload(const std::string& who) {
  if (device_) encoder_kit::fail(EG_ERR_INTERNAL, who + ": the weights are uploaded once");
  who_ = who;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const Entry& e : plan_) {
    offsets.push_back(total);
    total += align_up(e.bytes ? e.bytes->size() : e.values->size() * (e.f32 ? 4 : 2));
  }
  std::vector<unsigned char> host(total, 0);
  for (size_t t = 0; t < plan_.size(); ++t) {
    unsigned char* out = host.data() + offsets[t];
    if (const std::vector<uint8_t>* bytes = plan_[t].bytes) {
      if (!bytes->empty()) std::memcpy(out, bytes->data(), bytes->size());
      continue;
    }
    const std::vector<float>& v = *plan_[t].values;
    if (plan_[t].f32) {
      if (!v.empty()) std::memcpy(out, v.data(), v.size() * 4);
    } else {
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t b = encoder_kit::f32_to_bf16(v[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
    }
  }
  throw_on_cuda_error(who.c_str(), cudaMalloc(&device_, total), "allocating the weights");
  throw_on_cuda_error(who.c_str(), cudaMemcpy(device_, host.data(), total, cudaMemcpyHostToDevice),
                      "uploading the weights");
  for (size_t t = 0; t < plan_.size(); ++t)
    *plan_[t].dst = static_cast<const void*>(static_cast<char*>(device_) + offsets[t]);
  plan_.clear();
  kept_.clear();
  kept_bytes_.clear();
}

}  // namespace encoder_kit::cuda
