#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/form_timing.hpp>

namespace encoder_kit::cuda {

int time_forms(size_t count, const std::function<int(size_t)>& run, cudaStream_t stream, int runs,
               int rounds, FormTimes& out) {
  ENCODER_KIT_REQUIRE(runs > 0 && rounds > 0);
  out.best_ms.assign(count, -1.0f);
  out.captured.assign(count, false);
  struct Resources {  // released however the timing ends
    cudaEvent_t ev[2] = {nullptr, nullptr};
    std::vector<cudaGraphExec_t> exec;
    ~Resources() {
      for (cudaEvent_t e : ev)
        if (e != nullptr) cudaEventDestroy(e);
      for (cudaGraphExec_t e : exec)
        if (e != nullptr) cudaGraphExecDestroy(e);
    }
  } r;
  r.exec.assign(count, nullptr);
  ENCODER_KIT_CUDA_TRY(cudaEventCreate(&r.ev[0]));
  ENCODER_KIT_CUDA_TRY(cudaEventCreate(&r.ev[1]));
  // A graph of `runs` calls of form i; the capture is ended whatever happens.
  auto capture = [&](size_t i) {
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    int failed = 0;
    for (int k = 0; k < runs && failed == 0; ++k) failed = run(i);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (failed == 0 && ended == cudaSuccess &&
        cudaGraphInstantiate(&r.exec[i], graph, 0) != cudaSuccess)
      r.exec[i] = nullptr;
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // a form that does not capture is timed eagerly
    out.captured[i] = r.exec[i] != nullptr;
  };
  for (size_t i = 0; i < count; ++i)  // a form that fails to run is left out
    if (run(i) == 0) {
      out.best_ms[i] = 0.0f;
      capture(i);
    } else {
      (void)cudaGetLastError();
    }
  int rc = 0;
  for (int round = 0; round < rounds && rc == 0; ++round)
    for (size_t i = 0; i < count && rc == 0; ++i) {
      if (out.best_ms[i] < 0.0f) continue;
      rc = static_cast<int>(cudaEventRecord(r.ev[0], stream));
      if (r.exec[i] != nullptr) {
        if (rc == 0) rc = static_cast<int>(cudaGraphLaunch(r.exec[i], stream));
      } else {
        for (int k = 0; k < runs && rc == 0; ++k) rc = run(i);
      }
      if (rc == 0) rc = static_cast<int>(cudaEventRecord(r.ev[1], stream));
      if (rc == 0) rc = static_cast<int>(cudaEventSynchronize(r.ev[1]));
      float ms = 0.0f;
      if (rc == 0) rc = static_cast<int>(cudaEventElapsedTime(&ms, r.ev[0], r.ev[1]));
      if (rc == 0 && (round == 0 || ms < out.best_ms[i])) out.best_ms[i] = ms;
    }
  if (rc != 0) return detail::record_failure(rc, "timing a form", __FILE__, __LINE__);
  return 0;
}

}  // namespace encoder_kit::cuda
