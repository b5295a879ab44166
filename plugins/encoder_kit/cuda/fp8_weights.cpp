// Fp8DeviceWeights: per-output-channel e4m3 weights, quantised on the host
// (fp8_e4m3.hpp) and uploaded in one allocation, as DeviceWeights does for bf16.
#include <encoder_kit/cuda/fp8_gemm.hpp>
#include <encoder_kit/cuda/plugin_host.hpp>
#include <encoder_kit/error.hpp>

#include <cstdio>
#include <cstring>

namespace encoder_kit::cuda {

Fp8DeviceWeights::~Fp8DeviceWeights() {
  if (!device_) return;
  const cudaError_t e = cudaFree(device_);
  if (e != cudaSuccess)
    std::fprintf(stderr, "%s: freeing FP8 weights: %s\n", who_.c_str(), cudaGetErrorString(e));
}

void Fp8DeviceWeights::add(const uint8_t** codes, const float** scales, const std::vector<float>& w,
                           int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || w.size() != static_cast<size_t>(rows * cols))
    encoder_kit::fail(EG_ERR_INTERNAL, "FP8 weights: a [" + std::to_string(rows) + ", " +
                                           std::to_string(cols) + "] matrix given " +
                                           std::to_string(w.size()) + " values");
  Entry e{codes, scales, std::vector<uint8_t>(w.size()),
          std::vector<float>(static_cast<size_t>(rows))};
  for (int64_t r = 0; r < rows; ++r)
    e.s[static_cast<size_t>(r)] =
        quantize_row_e4m3(w.data() + r * cols, cols, e.q.data() + r * cols);
  plan_.push_back(std::move(e));
}

size_t Fp8DeviceWeights::bytes() const {
  size_t total = 0;
  for (const Entry& e : plan_) total += align_up(e.q.size()) + align_up(e.s.size() * 4);
  return total;
}

void Fp8DeviceWeights::upload(const std::string& who) {
  if (device_) encoder_kit::fail(EG_ERR_INTERNAL, who + ": the FP8 weights are uploaded once");
  who_ = who;
  const size_t total = bytes();
  if (total == 0) return;
  std::vector<unsigned char> host(total, 0);
  std::vector<size_t> offsets;
  size_t at = 0;
  for (const Entry& e : plan_) {
    offsets.push_back(at);
    std::memcpy(host.data() + at, e.q.data(), e.q.size());
    at += align_up(e.q.size());
    std::memcpy(host.data() + at, e.s.data(), e.s.size() * 4);
    at += align_up(e.s.size() * 4);
  }
  throw_on_cuda_error(who.c_str(), cudaMalloc(&device_, total), "allocating the FP8 weights");
  throw_on_cuda_error(who.c_str(), cudaMemcpy(device_, host.data(), total, cudaMemcpyHostToDevice),
                      "uploading the FP8 weights");
  char* base = static_cast<char*>(device_);
  for (size_t t = 0; t < plan_.size(); ++t) {
    *plan_[t].codes = reinterpret_cast<const uint8_t*>(base + offsets[t]);
    *plan_[t].scales =
        reinterpret_cast<const float*>(base + offsets[t] + align_up(plan_[t].q.size()));
  }
  plan_.clear();
}

}  // namespace encoder_kit::cuda
