// The device the manager runs on: memory, copies, one stream, and "graphs".
// The CUDA backend records real CUDA graphs; the CPU backend records the
// forward call on its static buffers and replays it by calling it again.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/output_spec.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace encgraph {

class RecordedGraph {
 public:
  virtual ~RecordedGraph() = default;
  virtual void replay() = 0;
};

// A stopwatch over work on a backend's stream that never blocks: start() and
// stop() mark the stream around the work; elapsed_ms() is the device time
// between the marks once the work has finished, negative while it has not,
// NaN when the timing failed (it never throws: a timing is not worth a batch).
class StreamTimer {
 public:
  virtual ~StreamTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double elapsed_ms() = 0;
};

// A point on a backend's stream: the work queued before it. wait() blocks
// until that work has finished, whatever was queued after the mark.
class StreamMark {
 public:
  virtual ~StreamMark() = default;
  virtual void wait() = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual eg_device_type type() const = 0;
  virtual std::string name() const = 0;
  virtual void* stream() = 0;  // handed to plugins; nullptr on the CPU
  // Makes this backend's device current for the calling thread (CUDA APIs and
  // plugins allocate on the current device).
  virtual void make_current() {}

  // Device memory (256-byte aligned). alloc throws Error(Device) naming `what`
  // when memory runs out.
  virtual void* alloc(size_t bytes, const std::string& what) = 0;
  virtual void free(void* p) noexcept = 0;
  // Stream-ordered device memory for per-call results: cheap, no device-wide sync.
  virtual void* alloc_async(size_t bytes, const std::string& what) = 0;
  virtual void free_async(void* p) noexcept = 0;
  // Host memory the device copies from quickly (pinned for CUDA).
  virtual void* alloc_host(size_t bytes, const std::string& what) = 0;
  virtual void free_host(void* p) noexcept = 0;

  // Stream-ordered operations.
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_bytes(void* dst, int value, size_t bytes) = 0;
  void fill_zero(void* dst, size_t bytes) { fill_bytes(dst, 0, bytes); }
  virtual void synchronize() = 0;
  // Marks stream() (on the CPU the work has already run: the mark is passed).
  virtual std::shared_ptr<StreamMark> mark_stream();
  // Copies device memory to the host once the work before `mark` has run, on
  // a stream of its own: work queued on stream() after the mark runs on
  // meanwhile. The bytes are in place once finish_copies_out() returns, and
  // freeing `src` with free_async waits for the copy. The CPU copies at once.
  virtual void copy_to_host_after(const StreamMark& mark, void* dst, const void* src, size_t bytes);
  virtual void finish_copies_out() { synchronize(); }

  // Host staging slot `slot` may be rewritten once the work queued before the
  // matching mark has consumed it.
  virtual void mark_staging_consumed(int slot) = 0;
  virtual void wait_staging_free(int slot) = 0;

  // Uploads from a host staging slot that may overlap work already queued on
  // stream(): between begin_uploads(slot) and end_uploads(slot), upload()
  // copies may run on a copy engine while earlier work computes; once
  // end_uploads returns, work queued on stream() sees every byte in place.
  // reserve_uploads(bytes) sizes the device side for slots of `bytes` (a
  // backend without it, or an upload that does not fit, copies in line).
  // Follow end_uploads with mark_staging_consumed(slot): the next
  // begin_uploads(slot) waits on that mark before reusing the slot's memory.
  virtual void reserve_uploads(size_t /*bytes*/) {}
  virtual void release_uploads() noexcept {}
  virtual void begin_uploads(int /*slot*/) {}
  virtual void upload(void* dst, const void* src, size_t bytes, int /*slot*/) {
    copy_to_device(dst, src, bytes);
  }
  virtual void end_uploads(int /*slot*/) {}
  // Whether the device runs apart from the host, so that staging one batch
  // overlaps the replay before it (the first-batch split weighs on that).
  virtual bool overlaps_staging() const { return false; }
  // Whether every piece of work queued on stream() has finished (never waits).
  virtual bool stream_idle() { return true; }
  // Device bytes reserve_uploads holds (both slots).
  virtual size_t upload_reserve_bytes() const { return 0; }

  // Host seconds one capture() spent recording and instantiating.
  struct CaptureTimes {
    double record_s = 0.0;       // running `body` under capture
    double instantiate_s = 0.0;  // building the replayable graph
  };
  // Records `body` (which enqueues work on stream()) into a graph. `what` names
  // the graph for errors. Adds its host time to `times` when given.
  virtual std::unique_ptr<RecordedGraph> capture(const std::function<void()>& body,
                                                 const std::string& what,
                                                 CaptureTimes* times = nullptr) = 0;

  // Milliseconds the device spends on the work `enqueue` puts on stream()
  // (device events on CUDA, the wall clock on the CPU). Synchronises.
  virtual double time_ms(const std::function<void()>& enqueue) = 0;

  // A StreamTimer on stream() (device events on CUDA, the wall clock on the
  // CPU, whose work runs on the calling thread).
  virtual std::unique_ptr<StreamTimer> make_timer() = 0;
};

std::shared_ptr<DeviceBackend> make_cpu_backend();
// Throws Error(Device) when CUDA is not compiled in or no device is usable.
// overlap_uploads: RuntimeConfig::overlap_uploads.
std::shared_ptr<DeviceBackend> make_cuda_backend(int device_index, bool overlap_uploads = true);
// Whether a CUDA device is present and usable (false when built without CUDA).
bool cuda_device_available();
// CUDA devices this process sees (0 without CUDA).
int cuda_device_count();

}  // namespace encgraph
