#include "cuda_check.hpp"
#include "device_backend.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace encgraph {
namespace {

void log_if_failed(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    spdlog::error("CUDA error {} while {} (ignored in a destructor)", cudaGetErrorName(status),
                  what);
}

// Move-only owners; destructors log instead of throwing.
class Stream {
 public:
  Stream() { EG_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) log_if_failed(cudaStreamDestroy(s_), "destroying a stream");
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { EG_CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  ~Event() {
    if (e_) log_if_failed(cudaEventDestroy(e_), "destroying an event");
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// StreamTimer on CUDA events. A record or query that fails (rather than "not
// ready") makes the timing NaN: the caller drops it.
class EventTimer final : public StreamTimer {
 public:
  EventTimer(int device, cudaStream_t stream) : device_(device), stream_(stream) {
    EG_CUDA_CHECK(cudaEventCreate(&start_));
    if (const cudaError_t err = cudaEventCreate(&stop_); err != cudaSuccess) {
      (void)cudaEventDestroy(start_);
      cuda_detail::throw_cuda(err, "cudaEventCreate(&stop_)", __FILE__, __LINE__);
    }
  }
  ~EventTimer() override {
    log_if_failed(cudaEventDestroy(start_), "destroying a timing event");
    log_if_failed(cudaEventDestroy(stop_), "destroying a timing event");
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start() override { record(start_); }
  void stop() override { record(stop_); }
  double elapsed_ms() override {
    if (failed_ || !started_) return std::nan("");
    if (!stopped_) return -1.0;
    const cudaError_t state = cudaEventQuery(stop_);
    if (state == cudaErrorNotReady) return -1.0;
    float ms = 0.0f;
    if (state != cudaSuccess || cudaEventElapsedTime(&ms, start_, stop_) != cudaSuccess) {
      (void)cudaGetLastError();  // this timer's own error, consumed here
      failed_ = true;
      return std::nan("");
    }
    return ms;
  }

 private:
  void record(cudaEvent_t e) {
    int previous = 0;
    if (failed_ || cudaGetDevice(&previous) != cudaSuccess) {
      failed_ = true;
      return;
    }
    bool ok = previous == device_ || cudaSetDevice(device_) == cudaSuccess;
    ok = ok && cudaEventRecord(e, stream_) == cudaSuccess;
    if (previous != device_) log_if_failed(cudaSetDevice(previous), "restoring the device");
    if (!ok) {
      (void)cudaGetLastError();
      failed_ = true;
      return;
    }
    (e == stop_ ? stopped_ : started_) = true;
  }
  int device_;
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool started_ = false, stopped_ = false, failed_ = false;
};

// Makes `device` current for a scope and restores the caller's device: stream
// operations must run with their stream's device current, and results of one
// rank are read and freed from threads that work on another.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    EG_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) EG_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~DeviceScope() {
    if (changed_) log_if_failed(cudaSetDevice(previous_), "restoring the current device");
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// A StreamMark on a CUDA event recorded on the backend's stream.
class EventMark final : public StreamMark {
 public:
  EventMark(int device, cudaStream_t stream) : device_(device) {
    const DeviceScope scope(device_);
    EG_CUDA_CHECK(cudaEventRecord(event_.get(), stream));
  }
  void wait() override {
    const DeviceScope scope(device_);
    EG_CUDA_CHECK(cudaEventSynchronize(event_.get()));
  }
  cudaEvent_t get() const { return event_.get(); }

 private:
  int device_;
  Event event_;
};

class CudaGraph final : public RecordedGraph {
 public:
  CudaGraph(cudaGraph_t graph, cudaGraphExec_t exec, cudaStream_t stream, int device)
      : graph_(graph), exec_(exec), stream_(stream), device_(device) {}
  ~CudaGraph() override {
    if (exec_) log_if_failed(cudaGraphExecDestroy(exec_), "destroying a graph exec");
    if (graph_) log_if_failed(cudaGraphDestroy(graph_), "destroying a graph");
  }
  void replay() override {
    const DeviceScope scope(device_);
    EG_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
  }

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  int device_;
};

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(int device, bool overlap_uploads)
      : device_(device), overlap_uploads_(overlap_uploads) {
    // Streams and events belong to the device current when they are made: make
    // them after selecting ours (a second rank's events made on device 0 failed
    // cudaEventRecord with an invalid resource handle). The caller's device is
    // restored afterwards.
    const DeviceScope scope(device);
    stream_ = std::make_unique<Stream>();
    for (auto& e : staging_events_) e = std::make_unique<Event>();
    cudaDeviceProp prop{};
    EG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    name_ = std::string("cuda:") + std::to_string(device) + " (" + prop.name + ")";
    // Per-call results come from our own stream-ordered pool that keeps its
    // memory across synchronisations; the default pool returns memory at every
    // sync and the next allocation pays to map it again (tens of microseconds).
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    EG_CUDA_CHECK(cudaMemPoolCreate(&result_pool_, &props));
    uint64_t keep = UINT64_MAX;
    EG_CUDA_CHECK(cudaMemPoolSetAttribute(result_pool_, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  ~CudaBackend() override {
    log_if_failed(cudaStreamSynchronize(stream_->get()), "synchronising at shutdown");
    release_uploads();
    if (result_pool_) log_if_failed(cudaMemPoolDestroy(result_pool_), "destroying the result pool");
  }

  eg_device_type type() const override { return EG_DEVICE_CUDA; }
  bool overlaps_staging() const override { return true; }
  bool stream_idle() override {
    const DeviceScope scope(device_);
    const cudaError_t st = cudaStreamQuery(stream_->get());
    if (st == cudaSuccess) return true;
    if (st == cudaErrorNotReady) return false;  // an answer, as for EventTimer's query
    EG_CUDA_CHECK(st);
    return false;
  }
  std::string name() const override { return name_; }
  void* stream() override { return stream_->get(); }
  void make_current() override { EG_CUDA_CHECK(cudaSetDevice(device_)); }

  void* alloc(size_t bytes, const std::string& what) override {
    const DeviceScope scope(device_);  // cudaMalloc allocates on the current device
    void* p = nullptr;
    const cudaError_t st = cudaMalloc(&p, bytes ? bytes : 1);
    if (st != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error state
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      throw Error(ErrorKind::Device,
                  std::string("CUDA ") + cudaGetErrorName(st) + " allocating " +
                      std::to_string(bytes >> 20) + " MiB for " + what + " (" +
                      std::to_string(free_b >> 20) + " MiB free of " +
                      std::to_string(total_b >> 20) +
                      "); lower the largest token budget or max_items_per_batch");
    }
    return p;
  }
  void free(void* p) noexcept override {
    if (!p) return;
    log_if_failed(cudaFree(p), "freeing device memory");
  }
  void* alloc_host(size_t bytes, const std::string& what) override {
    void* p = nullptr;
    const cudaError_t st = cudaMallocHost(&p, bytes ? bytes : 1);
    if (st != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(ErrorKind::Device, std::string("CUDA ") + cudaGetErrorName(st) +
                                         " allocating pinned host memory for " + what);
    }
    return p;
  }
  void free_host(void* p) noexcept override {
    if (p) log_if_failed(cudaFreeHost(p), "freeing pinned memory");
  }

  void copy_to_device(void* d, const void* s, size_t n) override {
    const DeviceScope scope(device_);
    if (n) EG_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, stream_->get()));
  }
  void copy_on_device(void* d, const void* s, size_t n) override {
    const DeviceScope scope(device_);
    if (n) EG_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, stream_->get()));
  }
  void copy_to_host(void* d, const void* s, size_t n) override {
    const DeviceScope scope(device_);
    if (n) EG_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, stream_->get()));
  }
  void fill_bytes(void* d, int value, size_t n) override {
    const DeviceScope scope(device_);
    if (n) EG_CUDA_CHECK(cudaMemsetAsync(d, value, n, stream_->get()));
  }
  void* alloc_async(size_t bytes, const std::string& what) override {
    const DeviceScope scope(device_);
    void* p = nullptr;
    const cudaError_t st =
        cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, result_pool_, stream_->get());
    if (st != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(ErrorKind::Device, std::string("CUDA ") + cudaGetErrorName(st) + " allocating " +
                                         std::to_string(bytes >> 20) + " MiB for " + what);
    }
    return p;
  }
  void free_async(void* p) noexcept override {
    if (!p) return;
    try {
      const DeviceScope scope(device_);
      {
        // Copies out of this memory may still run on the copy-out stream.
        std::lock_guard<std::mutex> lock(out_mutex_);
        if (out_done_)
          log_if_failed(cudaStreamWaitEvent(stream_->get(), out_done_->get(), 0),
                        "ordering a free after copies out");
      }
      log_if_failed(cudaFreeAsync(p, stream_->get()), "freeing results");
    } catch (const Error& e) {
      spdlog::error("freeing results: {}", e.what());
    }
  }
  void synchronize() override { EG_CUDA_CHECK(cudaStreamSynchronize(stream_->get())); }

  // Copies out run on a stream of their own behind the mark, so that a call
  // queued after the marked one computes while its rows travel (a copy
  // engine); free_async then waits for them before the memory is reused.
  std::shared_ptr<StreamMark> mark_stream() override {
    return std::make_shared<EventMark>(device_, stream_->get());
  }
  void copy_to_host_after(const StreamMark& mark, void* d, const void* s, size_t n) override {
    if (!n) return;
    const auto* event = dynamic_cast<const EventMark*>(&mark);
    if (!event) throw Error(ErrorKind::Internal, name_ + ": a mark of another backend");
    const DeviceScope scope(device_);
    cudaStream_t out = nullptr;
    cudaEvent_t done = nullptr;
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      if (!out_stream_) {
        out_stream_ = std::make_unique<Stream>();
        out_done_ = std::make_unique<Event>();
      }
      out = out_stream_->get();
      done = out_done_->get();
    }
    // Not under the lock: a copy into pageable memory returns once it has run.
    EG_CUDA_CHECK(cudaStreamWaitEvent(out, event->get(), 0));
    EG_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, out));
    EG_CUDA_CHECK(cudaEventRecord(done, out));
  }
  void finish_copies_out() override {
    const DeviceScope scope(device_);
    cudaStream_t out = nullptr;
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      if (out_stream_) out = out_stream_->get();
    }
    if (out) EG_CUDA_CHECK(cudaStreamSynchronize(out));
  }

  // Uploads overlap the work before them: host->device copies into a device
  // mirror of the slot run on a second stream (a copy engine) while the
  // previous batch computes, then one device-to-device copy per span puts
  // them in place on stream() (about 3 TB/s, against ~50 GB/s over PCIe).
  void reserve_uploads(size_t bytes) override {
    if (!overlap_uploads_ || bytes < kMinOverlappedSpan || bytes <= mirror_bytes_) return;
    release_uploads();
    const DeviceScope scope(device_);
    try {
      if (!copy_stream_) copy_stream_ = std::make_unique<Stream>();
      for (auto& e : uploaded_events_)
        if (!e) e = std::make_unique<Event>();
      // Spans start 256-byte aligned in the mirror: room for each buffer's rounding.
      const size_t room = bytes + 256 * EG_MAX_BUFFERS;
      for (void*& m : mirror_) m = alloc(room, "overlapped upload staging");
      mirror_bytes_ = room;
    } catch (const Error& e) {
      // An optimisation, not a requirement: without the mirror, copies run in line.
      release_uploads();
      spdlog::warn("{}: input copies will not overlap compute ({})", name_, e.what());
    }
  }
  void release_uploads() noexcept override {
    if (copy_stream_) log_if_failed(cudaStreamSynchronize(copy_stream_->get()), "ending uploads");
    for (void*& m : mirror_) {
      free(m);
      m = nullptr;
    }
    mirror_bytes_ = 0;
  }
  size_t upload_reserve_bytes() const override { return 2 * mirror_bytes_; }
  void begin_uploads(int /*slot*/) override {
    pending_.clear();
    mirror_used_ = 0;
  }
  void upload(void* dst, const void* src, size_t bytes, int slot) override {
    if (mirror_bytes_ == 0 || bytes < kMinOverlappedSpan || mirror_used_ + bytes > mirror_bytes_) {
      copy_to_device(dst, src, bytes);  // small, or no room: in line
      return;
    }
    const DeviceScope scope(device_);
    // The mirror slot is free once the copies out of it, marked with the host
    // slot's event after the previous end_uploads(slot), have run.
    if (pending_.empty())
      EG_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_->get(), staging_events_.at(slot)->get(), 0));
    char* staged = static_cast<char*>(mirror_.at(slot)) + mirror_used_;
    EG_CUDA_CHECK(cudaMemcpyAsync(staged, src, bytes, cudaMemcpyHostToDevice, copy_stream_->get()));
    pending_.push_back({dst, staged, bytes});
    mirror_used_ += (bytes + 255) / 256 * 256;
  }
  void end_uploads(int slot) override {
    if (pending_.empty()) return;
    const DeviceScope scope(device_);
    cudaEvent_t uploaded = uploaded_events_.at(slot)->get();
    EG_CUDA_CHECK(cudaEventRecord(uploaded, copy_stream_->get()));
    EG_CUDA_CHECK(cudaStreamWaitEvent(stream_->get(), uploaded, 0));
    for (const PendingCopy& c : pending_)
      EG_CUDA_CHECK(
          cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToDevice, stream_->get()));
    pending_.clear();
  }

  void mark_staging_consumed(int slot) override {
    const DeviceScope scope(device_);
    EG_CUDA_CHECK(cudaEventRecord(staging_events_.at(slot)->get(), stream_->get()));
  }
  void wait_staging_free(int slot) override {
    EG_CUDA_CHECK(cudaEventSynchronize(staging_events_.at(slot)->get()));
  }

  std::unique_ptr<RecordedGraph> capture(const std::function<void()>& body, const std::string& what,
                                         CaptureTimes* times) override {
    using Clock = std::chrono::steady_clock;
    const auto record_start = Clock::now();
    const DeviceScope scope(device_);
    cudaStream_t s = stream_->get();
    // Global mode: an illegal call (sync, cudaMalloc) from any thread during the
    // capture fails instead of silently breaking the graph.
    EG_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaGraph_t graph = nullptr;
    // Ends the capture whatever the forward threw: a stream left capturing in
    // global mode would fail every later allocation in the process.
    auto abandon = [&] {
      (void)cudaStreamEndCapture(s, &graph);
      if (graph) (void)cudaGraphDestroy(graph);
      graph = nullptr;
      (void)cudaGetLastError();
    };
    try {
      body();
    } catch (const Error& e) {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      (void)cudaStreamIsCapturing(s, &status);
      (void)cudaStreamEndCapture(s, &graph);
      if (graph) (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      // A forward that failed because an earlier call of its own broke the
      // capture: say what breaks captures, not just the knock-on error.
      const std::string hint =
          status == cudaStreamCaptureStatusInvalidated
              ? " (the capture was invalidated: the forward made a call that is illegal inside "
                "a CUDA graph, such as a synchronisation, an allocation, or work on a stream "
                "other than the one it was given)"
              : "";
      throw Error(status == cudaStreamCaptureStatusInvalidated ? ErrorKind::Plugin : e.kind(),
                  "capturing " + what + ": " + e.what() + hint);
    } catch (...) {
      abandon();
      throw;
    }
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (end != cudaSuccess || graph == nullptr) {
      if (graph) (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw Error(ErrorKind::Plugin,
                  "capturing " + what + ": the capture was invalidated (" + cudaGetErrorName(end) +
                      "). The forward made a call that is illegal inside a CUDA graph: a "
                      "synchronisation, an allocation, or work on a stream other than the one "
                      "it was given");
    }
    // Host work: a capture records kernels without running them; instantiating
    // builds the executable graph and queues its upload.
    const auto instantiate_start = Clock::now();
    if (times)
      times->record_s += std::chrono::duration<double>(instantiate_start - record_start).count();
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    if (inst != cudaSuccess) {
      (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw Error(ErrorKind::Device, std::string("instantiating ") + what + ": CUDA " +
                                         cudaGetErrorName(inst) + " (" + cudaGetErrorString(inst) +
                                         ")");
    }
    // Uploaded now (stream-ordered, asynchronous) rather than at the first
    // launch, so the first replay, which the cost model times, runs as later
    // ones do.
    const cudaError_t up = cudaGraphUpload(exec, s);
    if (times)
      times->instantiate_s +=
          std::chrono::duration<double>(Clock::now() - instantiate_start).count();
    if (up != cudaSuccess) {
      (void)cudaGraphExecDestroy(exec);
      (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw Error(ErrorKind::Device, std::string("uploading ") + what + ": CUDA " +
                                         cudaGetErrorName(up) + " (" + cudaGetErrorString(up) +
                                         ")");
    }
    return std::make_unique<CudaGraph>(graph, exec, s, device_);
  }

  std::unique_ptr<StreamTimer> make_timer() override {
    const DeviceScope scope(device_);
    return std::make_unique<EventTimer>(device_, stream_->get());
  }

  double time_ms(const std::function<void()>& enqueue) override {
    const DeviceScope scope(device_);
    cudaEvent_t start = nullptr, stop = nullptr;
    EG_CUDA_CHECK(cudaEventCreate(&start));
    if (const cudaError_t err = cudaEventCreate(&stop); err != cudaSuccess) {
      (void)cudaEventDestroy(start);
      cuda_detail::throw_cuda(err, "cudaEventCreate(&stop)", __FILE__, __LINE__);
    }
    float ms = 0.0f;
    try {
      EG_CUDA_CHECK(cudaEventRecord(start, stream_->get()));
      enqueue();
      EG_CUDA_CHECK(cudaEventRecord(stop, stream_->get()));
      EG_CUDA_CHECK(cudaEventSynchronize(stop));
      EG_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    } catch (...) {
      (void)cudaEventDestroy(start);
      (void)cudaEventDestroy(stop);
      throw;
    }
    log_if_failed(cudaEventDestroy(start), "destroying a timing event");
    log_if_failed(cudaEventDestroy(stop), "destroying a timing event");
    return ms;
  }

 private:
  int device_;
  bool overlap_uploads_;  // RuntimeConfig::overlap_uploads
  std::string name_;
  std::unique_ptr<Stream> stream_;
  std::array<std::unique_ptr<Event>, 2> staging_events_;
  // Overlapped uploads (reserve_uploads): a copy stream, a device mirror per
  // staging slot, and the copies out of the mirror that end_uploads queues.
  // Spans under 1 MiB copy in line: their PCIe time is below the cost of
  // the extra event and copy.
  static constexpr size_t kMinOverlappedSpan = size_t{1} << 20;
  struct PendingCopy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::unique_ptr<Stream> copy_stream_;
  std::array<std::unique_ptr<Event>, 2> uploaded_events_;
  // Copies out (copy_to_host_after): their stream and the event after the
  // last one queued; the mutex covers both (results may die on any thread).
  std::mutex out_mutex_;
  std::unique_ptr<Stream> out_stream_;
  std::unique_ptr<Event> out_done_;
  std::array<void*, 2> mirror_{nullptr, nullptr};
  size_t mirror_bytes_ = 0, mirror_used_ = 0;
  std::vector<PendingCopy> pending_;
  cudaMemPool_t result_pool_ = nullptr;
};

}  // namespace

std::shared_ptr<DeviceBackend> make_cuda_backend(int device_index, bool overlap_uploads) {
  int count = 0;
  const cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw Error(ErrorKind::Device,
                std::string("no usable CUDA device (") +
                    (st != cudaSuccess ? cudaGetErrorString(st) : "device count is 0") +
                    "); run on the CPU instead: runtime.device = \"cpu\", or \"cpu\" ranks in "
                    "runtime.data_parallel");
  }
  if (device_index < 0 || device_index >= count)
    throw Error(ErrorKind::Config, "CUDA device " + std::to_string(device_index) +
                                       " does not exist (" + std::to_string(count) + " present)");
  return std::make_shared<CudaBackend>(device_index, overlap_uploads);
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

bool cuda_device_available() {
  return cuda_device_count() > 0;
}

}  // namespace encgraph
