// What a runtime's graphs did: hits and misses per item, batches per path and
// why a path ran eagerly, padding efficiency, capture cost.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace encgraph {

// Why one path of one batch ran eagerly instead of replaying a graph.
enum class EagerReason : int {
  GraphsOff = 0,       // use_graphs = false, not captured yet, or an eager call (verify)
  TooLarge = 1,        // no captured budget holds the path's tokens
  TooManyFrames = 2,   // the batch (one item) has more frames than max_frames_per_batch
  NoGraphForAxis = 3,  // no graph for the batch's capture-axis keys
  ChosenFaster = 4,    // a graph fitted, but an eager run was expected clearly faster
};
inline constexpr int kNumEagerReasons = 5;
// "graphs off", "too large", "too many frames", "no graph for axis keys", "chosen as faster".
const char* eager_reason_name(EagerReason reason);

struct PathStats {
  std::string name;
  std::string unit;           // what the path's budgets count
  int64_t graphs = 0;         // captured graphs of this path
  int64_t batches_graph = 0;  // batches whose tokens on this path replayed a graph
  int64_t batches_eager = 0;  // batches whose tokens on this path ran eagerly
  std::array<int64_t, kNumEagerReasons> eager_by_reason{};  // indexed by EagerReason
  int64_t real_tokens = 0;    // tokens sent through this path's graphs
  int64_t budget_tokens = 0;  // budgets of those graphs
};

// Where the last capture's time went, in seconds of host wall clock (they sum
// to capture_seconds; `other` is the remainder). Device work is counted where
// the manager already waits for it: the warm-up ends with a device sync and the
// calibration's timings synchronise; recording a CUDA capture and
// instantiating it are host work (no kernels run; the graph's upload to the
// device is queued at instantiation and runs asynchronously).
struct CapturePhases {
  double prepare_device = 0.0;  // the plugin's prepare_device (the first capture only)
  double warmup = 0.0;          // each graph's warm-up forward before its capture, with the sync
  double capture = 0.0;         // recording the forward into a graph (a real run on the CPU)
  double instantiate = 0.0;     // building the executable graph and queueing its upload
  double calibrate = 0.0;       // the cost model: timed replays and eager forwards
  double other = 0.0;  // allocating arenas and buffers, staging the capture inputs, the rest
};

struct Stats {
  // An item is a hit only when every path it sends tokens through replayed.
  int64_t graph_hits = 0;
  int64_t graph_misses = 0;
  double hit_rate = 0.0;
  int64_t num_graphs = 0;
  std::vector<int64_t> token_budgets;
  int64_t real_tokens = 0;               // all paths: tokens sent through graphs
  int64_t budget_tokens = 0;             // all paths: the budgets of those graphs
  double padded_token_efficiency = 0.0;  // real_tokens / budget_tokens
  int64_t batches_graph = 0;             // every used path replayed
  int64_t batches_eager = 0;             // no used path replayed
  int64_t batches_mixed = 0;             // some paths replayed, some ran eagerly
  int64_t batches_eager_chosen = 0;      // batches with a path run eagerly as faster
  double capture_seconds = 0.0;
  CapturePhases capture_phases;    // the split of capture_seconds
  int64_t graph_memory_bytes = 0;  // buffers, outputs and workspace of the graphs
  std::vector<PathStats> paths;    // one per plugin path
};

// Adds b's counts to a (data parallelism sums its ranks); capture figures take the max.
void accumulate(Stats& a, const Stats& b);

}  // namespace encgraph
