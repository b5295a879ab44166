// Branches (encoder_kit/cuda/branches.hpp): launches forked from a stream and
// joined back. Captured, the graph's edges must show them after what came
// before, independent of each other (or chained where they share a side
// stream), and before what comes after; eager, every launch's write must land
// after the origin's earlier work; a failing launch must still leave the
// capture joined.
#include "gpu_test_util.hpp"

#include <encoder_kit/cuda/branches.hpp>

#include <functional>
#include <map>
#include <set>
#include <vector>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;

namespace {

constexpr size_t kRegion = 4096;  // bytes each launch writes

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// The memset nodes of a graph by destination, and which nodes each one
// follows (its ancestors, through any nodes between).
struct Topology {
  std::map<const void*, cudaGraphNode_t> by_dst;
  std::map<cudaGraphNode_t, std::set<cudaGraphNode_t>> ancestors;

  explicit Topology(cudaGraph_t graph) {
    size_t n = 0, e = 0;
    CUDA_OK(cudaGraphGetNodes(graph, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    CUDA_OK(cudaGraphGetNodes(graph, nodes.data(), &n));
    CUDA_OK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &e));
    std::vector<cudaGraphNode_t> from(e), to(e);
    std::vector<cudaGraphEdgeData> data(e);
    CUDA_OK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &e));
    std::map<cudaGraphNode_t, std::vector<cudaGraphNode_t>> parents;
    for (size_t i = 0; i < e; ++i) parents[to[i]].push_back(from[i]);
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      CUDA_OK(cudaGraphNodeGetType(node, &type));
      if (type == cudaGraphNodeTypeMemset) {
        cudaMemsetParams p{};
        CUDA_OK(cudaGraphMemsetNodeGetParams(node, &p));
        by_dst[p.dst] = node;
      }
      std::set<cudaGraphNode_t>& seen = ancestors[node];
      std::vector<cudaGraphNode_t> todo = parents[node];
      while (!todo.empty()) {
        cudaGraphNode_t q = todo.back();
        todo.pop_back();
        if (seen.insert(q).second)
          for (cudaGraphNode_t r : parents[q]) todo.push_back(r);
      }
    }
  }
  bool follows(const void* later, const void* earlier) const {
    const cudaGraphNode_t a = by_dst.at(later), b = by_dst.at(earlier);
    return ancestors.at(a).count(b) > 0;
  }
};

// The buffer holds count + 2 regions. On `origin`: zero all of them, run
// `count` launches through `branches` (launch i sets region i + 1 to i + 1),
// then set the last region to 0xEE. Returns run's code. `fail_at`: that launch
// returns cudaErrorInvalidValue without writing.
size_t regions_bytes(int count) {
  return kRegion * static_cast<size_t>(count + 2);
}
unsigned char* region(unsigned char* buf, int r) {
  return buf + kRegion * static_cast<size_t>(r);
}
int enqueue(k::Branches& branches, cudaStream_t origin, unsigned char* buf, int count,
            int fail_at = -1) {
  CUDA_OK(cudaMemsetAsync(buf, 0, regions_bytes(count), origin));
  const int rc = branches.run(origin, count, [&](int i, cudaStream_t s) -> int {
    if (i == fail_at) return static_cast<int>(cudaErrorInvalidValue);
    return static_cast<int>(cudaMemsetAsync(region(buf, i + 1), i + 1, kRegion, s));
  });
  CUDA_OK(cudaMemsetAsync(region(buf, count + 1), 0xEE, kRegion, origin));
  return rc;
}

cudaGraph_t capture(k::Branches& branches, cudaStream_t origin, unsigned char* buf, int count) {
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeGlobal));
  const int rc = enqueue(branches, origin, buf, count);
  CUDA_OK(cudaStreamEndCapture(origin, &graph));
  CHECK(rc == 0);
  return graph;
}

void check_written(const unsigned char* dev, int count) {
  std::vector<unsigned char> host(regions_bytes(count));
  CUDA_OK(cudaMemcpy(host.data(), dev, host.size(), cudaMemcpyDeviceToHost));
  for (int r = 0; r < count + 2; ++r) {
    const unsigned char want = r == 0 ? 0 : r == count + 1 ? 0xEE : static_cast<unsigned char>(r);
    size_t wrong = 0;
    for (size_t b = 0; b < kRegion; ++b)
      wrong += host[kRegion * static_cast<size_t>(r) + b] != want;
    CAPTURE(r);
    CHECK(wrong == 0);
  }
}

}  // namespace

GPU_TEST_CASE("branches: captured launches follow the fork, run side by side, precede the join") {
  require_gpu();
  constexpr int kCount = 5;
  for (const int sides : {k::Branches::sides_for(kCount), 2}) {
    CAPTURE(sides);
    k::Branches branches;
    REQUIRE(branches.reserve(sides) == 0);
    CHECK(branches.side_streams() == sides);
    Stream origin;
    DeviceBuffer<unsigned char> buf(regions_bytes(kCount));
    cudaGraph_t graph = capture(branches, origin.s, buf.get(), kCount);
    {
      const Topology t(graph);
      auto at = [&](int r) { return static_cast<const void*>(region(buf.get(), r)); };
      REQUIRE(t.by_dst.size() == kCount + 2);
      for (int i = 1; i <= kCount; ++i) {
        CAPTURE(i);
        CHECK(t.follows(at(i), at(0)));           // after the zeroing
        CHECK(t.follows(at(kCount + 1), at(i)));  // before the final write
        for (int j = 1; j <= kCount; ++j) {
          if (i == j) continue;
          // Launch i - 1 runs on the origin (i = 1) or on side stream
          // (i - 2) % sides: chained only when two share a side stream.
          const bool chained = k::attention_branches_enabled()
                                   ? i > 1 && j > 1 && (i - 2) % sides == (j - 2) % sides && j < i
                                   : j < i;
          CAPTURE(j);
          CHECK(t.follows(at(i), at(j)) == chained);
        }
      }
    }
    // Replayed, every region holds its launch's value.
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaMemset(buf.get(), 0x55, regions_bytes(kCount)));
    CUDA_OK(cudaGraphLaunch(exec, origin.s));
    CUDA_OK(cudaStreamSynchronize(origin.s));
    check_written(buf.get(), kCount);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

GPU_TEST_CASE("branches: a captured graph has one root, the origin's earlier work") {
  require_gpu();
  // The fork follows the origin's earlier work: the zeroing memset is the
  // graph's single root, so no launch can run before it.
  k::Branches branches;
  REQUIRE(branches.reserve(3) == 0);
  Stream origin;
  DeviceBuffer<unsigned char> buf(regions_bytes(4));
  cudaGraph_t graph = capture(branches, origin.s, buf.get(), 4);
  size_t roots = 0;
  CUDA_OK(cudaGraphGetRootNodes(graph, nullptr, &roots));
  CHECK(roots == 1);
  cudaGraphDestroy(graph);
}

GPU_TEST_CASE("branches: eager launches land after the origin's work, before its next") {
  require_gpu();
  constexpr int kCount = 6;
  k::Branches branches;
  REQUIRE(branches.reserve(k::Branches::sides_for(kCount)) == 0);
  Stream origin;
  DeviceBuffer<unsigned char> buf(regions_bytes(kCount));
  for (int round = 0; round < 20; ++round) {
    CUDA_OK(cudaMemset(buf.get(), 0x55, regions_bytes(kCount)));
    CHECK(enqueue(branches, origin.s, buf.get(), kCount) == 0);
    CUDA_OK(cudaStreamSynchronize(origin.s));
    check_written(buf.get(), kCount);
  }
}

GPU_TEST_CASE("branches: without side streams every launch runs on the origin") {
  require_gpu();
  k::Branches branches;  // none reserved
  CHECK(branches.side_streams() == 0);
  Stream origin;
  DeviceBuffer<unsigned char> buf(regions_bytes(3));
  cudaGraph_t graph = capture(branches, origin.s, buf.get(), 3);
  const Topology t(graph);
  CHECK(t.follows(region(buf.get(), 3), region(buf.get(), 2)));
  CHECK(t.follows(region(buf.get(), 2), region(buf.get(), 1)));
  cudaGraphDestroy(graph);
  CHECK(k::Branches::sides_for(1) == 0);
  CHECK(k::Branches::sides_for(0) == 0);
  CHECK(k::Branches::sides_for(100) == k::Branches::kMaxSideStreams);
}

GPU_TEST_CASE("branches: a failing launch returns its code and the capture still ends joined") {
  require_gpu();
  k::Branches branches;
  REQUIRE(branches.reserve(3) == 0);
  Stream origin;
  DeviceBuffer<unsigned char> buf(regions_bytes(4));
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(origin.s, cudaStreamCaptureModeGlobal));
  const int rc = enqueue(branches, origin.s, buf.get(), 4, /*fail_at=*/2);
  // An unjoined side stream would make this cudaErrorStreamCaptureUnjoined.
  CHECK(cudaStreamEndCapture(origin.s, &graph) == cudaSuccess);
  CHECK(rc == static_cast<int>(cudaErrorInvalidValue));
  if (graph) cudaGraphDestroy(graph);
  // Eager, too: the side streams are joined, and usable again.
  CHECK(enqueue(branches, origin.s, buf.get(), 4, 1) == static_cast<int>(cudaErrorInvalidValue));
  CHECK(enqueue(branches, origin.s, buf.get(), 4) == 0);
  CUDA_OK(cudaStreamSynchronize(origin.s));
  check_written(buf.get(), 4);
}
