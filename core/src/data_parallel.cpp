#include "communicator.hpp"
#include "device_backend.hpp"

#include <encgraph/data_parallel.hpp>
#include <encgraph/error.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <thread>
#include <utility>

namespace encgraph {
namespace {

int cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  try {
    if (device.rfind("cuda:", 0) == 0) return std::stoi(device.substr(5));
  } catch (const std::exception&) {
  }
  throw_config("data parallel device \"" + device + "\" is not \"cpu\" or \"cuda:N\"");
}

// A rank's stream-ordered allocation, freed on scope exit unless released: a
// rank that throws must not strand the other ranks' blocks in the result pool,
// which keeps its memory for the life of the process.
class RankBlock {
 public:
  RankBlock() = default;
  RankBlock(DeviceBackend& backend, size_t bytes, const char* what)
      : backend_(&backend), p_(backend.alloc_async(std::max<size_t>(bytes, 1), what)) {}
  RankBlock(RankBlock&& o) noexcept : backend_(o.backend_), p_(std::exchange(o.p_, nullptr)) {}
  RankBlock& operator=(RankBlock&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = o.backend_;
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  RankBlock(const RankBlock&) = delete;
  RankBlock& operator=(const RankBlock&) = delete;
  ~RankBlock() { reset(); }

  char* get() const { return static_cast<char*>(p_); }
  void* release() { return std::exchange(p_, nullptr); }

 private:
  void reset() noexcept {
    if (p_) backend_->free_async(std::exchange(p_, nullptr));  // device-scoped, noexcept
  }
  DeviceBackend* backend_ = nullptr;
  void* p_ = nullptr;
};

// Runs fn(rank) on one thread per rank and rethrows the first failure.
void on_every_rank(int ranks, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

DataParallelRuntime::DataParallelRuntime(const RuntimeConfig& config,
                                         const std::vector<std::string>& devices) {
  if (devices.empty()) throw_config("data parallel needs at least one device");
  const bool cpu = devices.front() == "cpu";
  std::vector<int> cuda_devices;
  for (const auto& d : devices) {
    if ((d == "cpu") != cpu)
      throw_config("data parallel ranks must be all \"cpu\" or all CUDA devices");
    if (!cpu) cuda_devices.push_back(cuda_index(d));
  }
  for (const auto& d : devices) {
    RuntimeConfig rank_config = config;
    rank_config.device = d;
    try {
      ranks_.push_back(std::make_unique<Runtime>(rank_config));
    } catch (const Error& e) {
      throw Error(e.kind(), "data-parallel rank " + std::to_string(ranks_.size()) + " on \"" + d +
                                "\": " + e.what());
    }
  }
  comm_ = cpu ? make_in_process_communicator(static_cast<int>(devices.size()))
              : make_nccl_communicator(cuda_devices);
}

DataParallelRuntime::~DataParallelRuntime() = default;

void DataParallelRuntime::capture() {
  // One rank at a time: a CUDA capture in global mode forbids allocations and
  // synchronisations in every thread of the process, so a rank allocating its
  // next graph's buffers would break another rank's capture (seen on two H200s:
  // cudaErrorStreamCaptureUnsupported).
  for (auto& rank : ranks_) rank->capture();
}

DataParallelRequest DataParallelRuntime::prepare(const std::vector<eg_item_desc>& descs,
                                                 const std::vector<std::string>& labels) {
  // A failing item is named as the caller knows it (a file, a trace line).
  auto make = [&](int r, size_t i) {
    try {
      return ranks_[r]->make_item(descs[i]);
    } catch (const Error& e) {
      throw Error(e.kind(),
                  (i < labels.size() ? labels[i] : "item " + std::to_string(i)) + ": " + e.what());
    }
  };
  const int world = world_size();
  DataParallelRequest request;
  request.rank_items.resize(world);
  // Rank 0 makes every item: their specs drive the assignment (every rank runs
  // the same plugin and config, so the specs agree). Then the other ranks make
  // only the items they run, together.
  std::vector<Item> all;
  all.reserve(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) all.push_back(make(0, i));
  std::vector<int64_t> input_sizes;
  for (const auto& item : all) {
    input_sizes.push_back(item.spec().input_size);
    request.tokens.push_back(item.spec().output_tokens);
  }
  request.assignment = balance_by_input_size(input_sizes, world);
  for (int64_t i : request.assignment.rank_items(0))
    request.rank_items[0].push_back(std::move(all[static_cast<size_t>(i)]));
  on_every_rank(world, [&](int r) {
    if (r == 0) return;
    for (int64_t i : request.assignment.rank_items(r))
      request.rank_items[r].push_back(make(r, static_cast<size_t>(i)));
  });
  return request;
}

Result DataParallelRuntime::execute(const std::vector<eg_item_desc>& descs) {
  return execute(prepare(descs));
}

Result DataParallelRuntime::execute(const DataParallelRequest& request) {
  const int world = world_size();
  if (static_cast<int>(request.rank_items.size()) != world)
    throw Error(ErrorKind::Internal, "a data-parallel request prepared for " +
                                         std::to_string(request.rank_items.size()) +
                                         " ranks run on " + std::to_string(world));
  assignment_ = request.assignment;
  const std::vector<int64_t>& tokens = request.tokens;
  const size_t num_items = tokens.size();
  int64_t max_rows = 0;
  for (int r = 0; r < world; ++r) {
    int64_t rows = 0;
    for (int64_t i : assignment_.rank_items(r)) rows += tokens[i];
    max_rows = std::max(max_rows, rows);
  }

  const eg_model_info& info = ranks_[0]->model_info();
  const size_t row_bytes = static_cast<size_t>(info.out_hidden_size) * dtype_size(info.out_dtype);
  const size_t block = static_cast<size_t>(max_rows) * row_bytes;
  // Each rank runs its items and lays its rows out in a send block on its own
  // thread; then one call gathers every block into every rank's recv.
  std::vector<RankBlock> sends(world), recvs(world);
  std::vector<GatherBuffers> buffers(world);
  on_every_rank(world, [&](int r) {
    DeviceBackend& backend = *ranks_[r]->backend_;
    backend.make_current();
    const std::vector<int64_t> mine = assignment_.rank_items(r);
    const Result out = ranks_[r]->execute(request.rank_items[r]);
    // This rank's rows in assignment order, padded to the largest rank's count.
    sends[r] = RankBlock(backend, block, "data-parallel send block");
    recvs[r] = RankBlock(backend, block * world, "data-parallel gather");
    size_t at = 0;
    for (size_t k = 0; k < mine.size(); ++k) {
      const eg_tensor t = out.item(k);
      const size_t bytes = static_cast<size_t>(out.rows(k)) * row_bytes;
      backend.copy_on_device(sends[r].get() + at, t.data, bytes);
      at += bytes;
    }
    buffers[r] = {sends[r].get(), recvs[r].get(), backend.stream()};
  });
  comm_->all_gather(buffers, block);
  // Unpad on rank 0: each rank's rows are contiguous at the start of its block
  // of max_rows, so one copy per rank packs them into rows 0..total-1 (a Result
  // is contiguous; to_host() copies total_rows()).
  DeviceBackend& home = *ranks_[0]->backend_;
  home.make_current();
  int64_t total_rows = 0;
  for (int64_t t : tokens) total_rows += t;
  RankBlock packed(home, static_cast<size_t>(total_rows) * row_bytes, "data-parallel result");
  Result result;
  result.offsets_.assign(num_items, 0);
  int64_t row = 0;
  for (int r = 0; r < world; ++r) {
    const int64_t first = row;
    for (int64_t i : assignment_.rank_items(r)) {
      result.offsets_[i] = row;
      row += tokens[i];
    }
    home.copy_on_device(packed.get() + static_cast<size_t>(first) * row_bytes,
                        recvs[0].get() + static_cast<size_t>(r) * block,
                        static_cast<size_t>(row - first) * row_bytes);
  }

  auto backend = ranks_[0]->backend_;
  result.memory_ =
      std::shared_ptr<void>(packed.release(), [backend](void* p) { backend->free_async(p); });
  result.backend_ = backend;
  result.hidden_ = info.out_hidden_size;
  result.dtype_ = info.out_dtype;
  result.device_ = backend->type();
  result.rows_ = tokens;
  for (int64_t t : tokens) result.total_rows_ += t;
  return result;
}

}  // namespace encgraph
