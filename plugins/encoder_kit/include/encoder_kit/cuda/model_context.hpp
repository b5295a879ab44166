// What every CUDA model of a kit plugin holds besides its weights and matrix
// products: the device it runs on, one cuBLASLt handle, the GEMM tuning cache,
// and which sizes were tuned; plus the checks each forward() starts with
// (workspace size, capture state, a graph larger than the plan). Header-only,
// for targets that link encgraph_encoder_kit besides encgraph_encoder_kit_cuda
// (as plugin_host.hpp). Every message starts with `who` ("siglip CUDA").
#pragma once

#include "kernels.hpp"
#include "plugin_host.hpp"
#include "tuning_cache.hpp"

#include <encoder_kit/error.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <utility>

namespace encoder_kit::cuda {

class ModelContext {
 public:
  explicit ModelContext(std::string who) : who_(std::move(who)) {}
  ~ModelContext() {
    if (handle_) cublasLtDestroy(handle_);
  }
  ModelContext(const ModelContext&) = delete;
  ModelContext& operator=(const ModelContext&) = delete;

  const std::string& who() const { return who_; }

  // A failed kit call (kernels.hpp status) or CUDA runtime call as an Error.
  void check(int rc, const char* what) const { throw_on_kit_failure(who_.c_str(), rc, what); }
  void check_cuda(cudaError_t e, const char* what) const {
    throw_on_cuda_error(who_.c_str(), e, what);
  }

  // cudaSetDevice, first of all (the upload and the handle are on it).
  void select_device(int device_index) { check_cuda(cudaSetDevice(device_index), "cudaSetDevice"); }

  // After the upload: the cuBLASLt handle, then the tuning cache (`setting`:
  // the tuning_cache key; `plugin` names it in the cache's warnings).
  void open(int device_index, const std::string& setting, const std::string& plugin,
            TuningWarn warn) {
    const cublasStatus_t st = cublasLtCreate(&handle_);
    if (st != CUBLAS_STATUS_SUCCESS)
      fail(EG_ERR_DEVICE, who_ + ": cublasLtCreate: " + cublasLtGetStatusString(st));
    gemm_cache_ = open_plugin_gemm_tuning_cache(device_index, setting, plugin, std::move(warn));
  }

  cublasLtHandle_t handle() const { return handle_; }

  // Freshly planned products: they share the tuning cache, and no size of
  // theirs is tuned yet.
  void planned(std::initializer_list<GemmPlan*> plans) {
    for (GemmPlan* p : plans) p->set_tuning_cache(gemm_cache_);
    tuned_.clear();
  }

  // One product C = A·W^T (+ bias, + residual) over `rows` rows on `s`, its
  // algorithm's scratch at `gemm_ws` (GemmPlan::workspace_bytes() of it);
  // `what` names the product in an error. tune() times its algorithms first
  // (outside a capture only: it synchronises).
  void run(const GemmPlan& p, const bf16* A, const bf16* W, const bf16* bias, const bf16* residual,
           bf16* C, int64_t rows, void* gemm_ws, cudaStream_t s, const char* what) const {
    check(p.run(handle_, A, W, bias, residual, C, rows, gemm_ws, GemmPlan::workspace_bytes(), s),
          what);
  }
  void tune(GemmPlan& p, const bf16* A, const bf16* W, const bf16* bias, const bf16* residual,
            bf16* C, int64_t rows, void* gemm_ws, cudaStream_t s, const char* what) const {
    check(p.tune(handle_, A, W, bias, residual, C, rows, gemm_ws, GemmPlan::workspace_bytes(), s),
          what);
  }

  // Refuses a workspace smaller than `need`; `say_needed` adds the need.
  void check_workspace(size_t need, size_t have, bool say_needed = false) const {
    if (need > have)
      fail(EG_ERR_INVALID_ARGUMENT,
           who_ + ": workspace of " + std::to_string(have) + " bytes is too small" +
               (say_needed ? " (" + std::to_string(need) + " needed)" : std::string()));
  }

  // Whether `s` is capturing a graph (then nothing may allocate or time).
  bool capturing(cudaStream_t s) const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check_cuda(cudaStreamIsCapturing(s, &status), "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
  }

  // A graph of `size` `unit` beyond the plan: planned again outside a
  // capture, an internal error inside one (its warm-up run would have).
  template <class Plan>
  void grow_plan(bool in_capture, int64_t size, const char* unit, Plan&& plan) {
    if (in_capture)
      fail(EG_ERR_INTERNAL, who_ + ": a graph of " + std::to_string(size) + " " + unit +
                                " was captured without its warm-up run");
    plan();
  }

  // `time_products()` once per `size` when asked (`tune`) outside a capture,
  // then the cache saved (never fatal: it warns once).
  template <class Time>
  void tune_once(bool tune, bool in_capture, int64_t size, Time&& time_products) {
    if (!tune || in_capture || tuned_.count(size)) return;
    time_products();
    tuned_.insert(size);
    save_cache();
  }

  void save_cache() const {
    if (gemm_cache_) gemm_cache_->save();
  }

 private:
  std::string who_;
  cublasLtHandle_t handle_ = nullptr;
  std::shared_ptr<TuningCache> gemm_cache_;  // null: tuning_cache = "off"
  std::set<int64_t> tuned_;                  // sizes whose products were timed
};

}  // namespace encoder_kit::cuda
