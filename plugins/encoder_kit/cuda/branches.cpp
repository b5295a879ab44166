// Branches (branches.hpp): fork, launch, join; the join runs on every path, so
// that a capture never ends with a side stream left out of it.
#include <encoder_kit/cuda/branches.hpp>
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/env_switch.hpp>

#include <algorithm>

namespace encoder_kit::cuda {

bool attention_branches_enabled() {
  static const bool enabled = env_switch_on("ENCGRAPH_ATTENTION_BRANCHES");
  return enabled;
}

Branches::~Branches() {
  // Errors are ignored: at exit the device may already be gone.
  for (Side& side : sides_) {
    if (side.joined) (void)cudaEventDestroy(side.joined);
    if (side.stream) (void)cudaStreamDestroy(side.stream);
  }
  if (forked_) (void)cudaEventDestroy(forked_);
  (void)cudaGetLastError();
}

int Branches::side_streams() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(sides_.size());
}

int Branches::reserve(int side_streams) {
  const std::lock_guard<std::mutex> lock(mutex_);
  int device = 0;
  ENCODER_KIT_CUDA_TRY(cudaGetDevice(&device));
  // Streams and events belong to one device; a model lives on one.
  ENCODER_KIT_REQUIRE(device_ < 0 || device_ == device);
  device_ = device;
  if (!forked_) ENCODER_KIT_CUDA_TRY(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  while (static_cast<int>(sides_.size()) < side_streams) {
    Side side;
    ENCODER_KIT_CUDA_TRY(cudaStreamCreateWithFlags(&side.stream, cudaStreamNonBlocking));
    if (const cudaError_t e = cudaEventCreateWithFlags(&side.joined, cudaEventDisableTiming);
        e != cudaSuccess) {
      (void)cudaStreamDestroy(side.stream);
      return detail::record_failure(static_cast<int>(e), "cudaEventCreateWithFlags(&side.joined)",
                                    __FILE__, __LINE__);
    }
    sides_.push_back(side);
  }
  return 0;
}

int Branches::run(cudaStream_t origin, int count,
                  const std::function<int(int, cudaStream_t)>& launch) {
  const std::lock_guard<std::mutex> lock(mutex_);
  int device = -1;
  const bool parallel = count > 1 && !sides_.empty() && attention_branches_enabled() &&
                        cudaGetDevice(&device) == cudaSuccess && device == device_;
  if (!parallel) {
    for (int i = 0; i < count; ++i)
      if (const int rc = launch(i, origin); rc != 0) return rc;
    return 0;
  }
  auto failure = [](cudaError_t e, const char* what, int line) {
    return detail::record_failure(static_cast<int>(e), what, __FILE__, line);
  };
  if (const cudaError_t e = cudaEventRecord(forked_, origin); e != cudaSuccess)
    return failure(e, "cudaEventRecord(forked_, origin)", __LINE__);
  const int used = std::min(count - 1, static_cast<int>(sides_.size()));
  int error = 0, forked = 0;
  for (; forked < used; ++forked)
    if (const cudaError_t e = cudaStreamWaitEvent(sides_[forked].stream, forked_, 0);
        e != cudaSuccess) {
      error = failure(e, "cudaStreamWaitEvent(side, forked_)", __LINE__);
      break;
    }
  for (int i = 0; error == 0 && i < count; ++i) {
    const cudaStream_t stream = i == 0 ? origin : sides_[(i - 1) % used].stream;
    error = launch(i, stream);
  }
  // Every side stream that waited on the fork joins back, whatever failed.
  for (int j = 0; j < forked; ++j) {
    cudaError_t e = cudaEventRecord(sides_[j].joined, sides_[j].stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(origin, sides_[j].joined, 0);
    if (e != cudaSuccess && error == 0) error = failure(e, "joining a side stream", __LINE__);
  }
  return error;
}

}  // namespace encoder_kit::cuda
