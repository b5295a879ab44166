// Independent launches of one forward on parallel branches of its stream: the
// full-attention buckets of a layer (one launch per group of sequences of
// similar length) write disjoint rows, so they need not run one after another.
// At one small image all but the first bucket are empty or nearly so, yet each
// launch still costs a few microseconds in a replay; as branches they overlap
// the first.
//
// Forked by an event recorded on the origin stream that every side stream
// waits on, joined by one event a side stream that the origin waits on. Inside
// a stream capture this makes parallel branches of the graph; in eager runs
// the side streams run beside the origin. The side streams are made before
// use (reserve, outside any capture): making streams is no part of a forward.
//
// ENCGRAPH_ATTENTION_BRANCHES=0 (read once a process) runs every launch on the
// origin, one after another: the benchmarks' A/B switch.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <vector>

namespace encoder_kit::cuda {

class Branches {
 public:
  Branches() = default;
  ~Branches();
  Branches(const Branches&) = delete;
  Branches& operator=(const Branches&) = delete;

  // Makes side streams (non-blocking) and their events on the current device
  // until `side_streams` exist; 0 or an error code (kernels.hpp's convention).
  // Not while the current device's stream is being captured.
  int reserve(int side_streams);
  int side_streams() const;
  // The side streams `launches` launches want: one each after the first, at
  // most kMaxSideStreams (more share them in turn).
  static int sides_for(int launches) { return std::clamp(launches - 1, 0, kMaxSideStreams); }
  static constexpr int kMaxSideStreams = 8;

  // Calls launch(i, stream) for i = 0 .. count - 1: launch 0 on `origin`, the
  // others on side streams forked from `origin` after the work already
  // enqueued there, and joined back so that work enqueued on `origin` later
  // follows all of them. More launches than side streams share them in turn.
  // Without side streams (none reserved, or the switch off) every launch runs
  // on `origin`. The join happens on every path; returns the first error,
  // launch's own or a fork's or join's.
  int run(cudaStream_t origin, int count, const std::function<int(int, cudaStream_t)>& launch);

 private:
  struct Side {
    cudaStream_t stream = nullptr;
    cudaEvent_t joined = nullptr;  // recorded on `stream` after its launches
  };
  mutable std::mutex mutex_;  // one forward at a time may use the events
  int device_ = -1;
  cudaEvent_t forked_ = nullptr;  // recorded on the origin before the launches
  std::vector<Side> sides_;
};

// Whether ENCGRAPH_ATTENTION_BRANCHES leaves branches on (unset: on).
bool attention_branches_enabled();

}  // namespace encoder_kit::cuda
