// What the versions' CUDA forwards share: error reporting named after the
// plugin, the weights' upload as one bf16 image, the cuBLASLt handle and
// tuning cache, and the forward's preamble (workspace check, products planned
// outside capture, tuned once per size in the warm-up).
#pragma once

#include "cuda_model.hpp"

#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/tuning_cache.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace qwen_vl {

namespace kit = encoder_kit::cuda;
using kit::bf16;

class CudaTower : public CudaModel {
 protected:
  // Selects the device and refuses a head_dim the attention kernel lacks.
  CudaTower(const VisionConfig& c, int device_index);
  ~CudaTower() override;

  void check(int rc, const char* what) const;
  void check_cuda(cudaError_t e, const char* what) const;
  [[noreturn]] void fail(eg_status status, const std::string& message) const;

  // Every parameter as bf16 in one device allocation: add() each host array
  // with the pointer that receives its place, then upload() once.
  class WeightImage {
   public:
    void add(const bf16** dst, const std::vector<float>& values) { plan_.emplace_back(dst, &values); }
    void upload(CudaTower& owner);

   private:
    std::vector<std::pair<const bf16**, const std::vector<float>*>> plan_;
  };

  // After the version's own set-up: the cuBLASLt handle, the tuning cache and
  // the products planned for `max_patches` rows.
  void start(const std::string& tuning_cache, Warn warn, int64_t max_patches);

  // The forward's preamble for `p` patch rows: products planned for them
  // (never inside a capture), and with `tune` the version's tune() run once
  // per size outside capture.
  void prepare(int64_t p, bool tune, cudaStream_t s, const std::function<void()>& run_tuning);

  virtual void plan_products(int64_t patches) = 0;

  VisionConfig c;
  std::string who;  // "<plugin> CUDA": leads every error message
  int device = 0;
  void* weights = nullptr;  // one allocation for every parameter
  cublasLtHandle_t handle = nullptr;
  int64_t planned_patches = 0;
  std::set<int64_t> tuned;  // patch counts whose algorithms were timed
  // tune()'s choices across processes (the tuning_cache key); null: off.
  std::shared_ptr<encoder_kit::TuningCache> gemm_cache;
};

// The versions' forwards (cuda_window_tower.cpp, cuda_deepstack_tower.cpp).
std::unique_ptr<CudaModel> make_window_tower(const Options& o, const Weights& w, int device_index,
                                             Warn warn);
std::unique_ptr<CudaModel> make_deepstack_tower(const Options& o, const Weights& w,
                                                int device_index, Warn warn);

}  // namespace qwen_vl
