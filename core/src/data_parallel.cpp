#include "communicator.hpp"
#include "device_backend.hpp"
#include "rank_block.hpp"

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

bool DataParallelRuntime::is_captured() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->is_captured(); });
}

Stats DataParallelRuntime::stats() const {
  Stats sum;
  for (const auto& rank : ranks_) accumulate(sum, rank->stats());
  return sum;
}

void DataParallelRuntime::synchronize() {
  for (auto& rank : ranks_) rank->synchronize();
}

int64_t DataParallelRuntime::bytes_received(int rank) const {
  return comm_->bytes_received(rank);
}

Request DataParallelRuntime::prepare(const std::vector<eg_item_desc>& descs,
                                     const std::vector<std::string>& labels) {
  const int world = world_size();
  Request request;
  request.rank_items.resize(world);
  // Rank 0 makes every item: their specs drive the assignment (every rank runs
  // the same plugin and config, so the specs agree). Then the other ranks make
  // only the items they run, together.
  std::vector<size_t> every(descs.size());
  for (size_t i = 0; i < every.size(); ++i) every[i] = i;
  std::vector<Item> all = ranks_[0]->make_items(descs, every, labels);
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
    std::vector<size_t> mine;
    for (int64_t i : request.assignment.rank_items(r)) mine.push_back(static_cast<size_t>(i));
    request.rank_items[r] = ranks_[r]->make_items(descs, mine, labels);
  });
  return request;
}

Request DataParallelRuntime::prepare_lazy(const std::vector<eg_item_desc>& descs,
                                          const std::vector<std::string>& labels,
                                          const PixelLoader& load) {
  const int world = world_size();
  Request request;
  request.rank_items.resize(world);
  // The assignment from the items' geometry alone: no rank decodes a file it
  // does not run, and the ranks load and make their items in parallel.
  std::vector<int64_t> input_sizes;
  for (size_t i = 0; i < descs.size(); ++i) {
    try {
      const eg_item_spec spec = ranks_[0]->spec_for(descs[i]);
      input_sizes.push_back(spec.input_size);
      request.tokens.push_back(spec.output_tokens);
    } catch (const Error& e) {
      throw Error(e.kind(), item_label(labels, i) + ": " + e.what());
    }
  }
  request.assignment = balance_by_input_size(input_sizes, world);
  on_every_rank(world, [&](int r) {
    std::vector<size_t> mine;
    for (int64_t i : request.assignment.rank_items(r)) mine.push_back(static_cast<size_t>(i));
    request.rank_items[r] = ranks_[r]->make_items(descs, mine, labels, &load);
  });
  return request;
}

std::vector<std::string> DataParallelRuntime::device_names() const {
  std::vector<std::string> names;
  for (const auto& rank : ranks_) names.push_back(rank->device_name());
  return names;
}

Result DataParallelRuntime::execute(const std::vector<eg_item_desc>& descs) {
  return execute(prepare(descs));
}

Result DataParallelRuntime::execute(const Request& request, ExecuteMode mode) {
  const int world = world_size();
  if (static_cast<int>(request.rank_items.size()) != world)
    throw Error(ErrorKind::Internal, "a data-parallel request prepared for " +
                                         std::to_string(request.rank_items.size()) +
                                         " ranks run on " + std::to_string(world));
  assignment_ = request.assignment;
  const std::vector<int64_t>& tokens = request.tokens;
  const size_t num_items = tokens.size();
  const std::vector<OutputSpec>& outputs = ranks_[0]->outputs();
  const size_t num_outputs = outputs.size();

  // Rows of item i in output o, in the caller's order: a fixed count, or the
  // item's output rows.
  std::vector<std::vector<int64_t>> rows(num_outputs, std::vector<int64_t>(num_items));
  for (size_t o = 0; o < num_outputs; ++o)
    for (size_t i = 0; i < num_items; ++i)
      rows[o][i] = outputs[o].rows_per_item > 0 ? outputs[o].rows_per_item : tokens[i];

  // A rank's send block holds each output's rows in assignment order, padded
  // to the largest rank's count, each output's part 256-aligned.
  std::vector<size_t> row_bytes(num_outputs), part(num_outputs), part_at(num_outputs);
  size_t block = 0;
  for (size_t o = 0; o < num_outputs; ++o) {
    row_bytes[o] = static_cast<size_t>(outputs[o].width) * dtype_size(outputs[o].dtype);
    int64_t max_rows = 0;
    for (int r = 0; r < world; ++r) {
      int64_t n = 0;
      for (int64_t i : assignment_.rank_items(r)) n += rows[o][static_cast<size_t>(i)];
      max_rows = std::max(max_rows, n);
    }
    part[o] = static_cast<size_t>(max_rows) * row_bytes[o];
    part_at[o] = block;
    block += (part[o] + 255) / 256 * 256;
  }

  // Each rank runs its items and lays its rows out in its send block on its
  // own thread; then one call gathers every block into rank 0's receive block.
  constexpr int kRoot = 0;
  std::vector<RankBlock> sends(world);
  RankBlock recv;
  std::vector<GatherBuffers> buffers(world);
  on_every_rank(world, [&](int r) {
    DeviceBackend& backend = *ranks_[r]->backend();
    backend.make_current();
    const std::vector<int64_t> mine = assignment_.rank_items(r);
    const Result out = ranks_[r]->execute(request.rank_items[r], mode);
    sends[r] = RankBlock(backend, block, "data-parallel send block");
    if (r == kRoot)
      recv = RankBlock(backend, block * static_cast<size_t>(world), "data-parallel gather");
    for (size_t o = 0; o < num_outputs; ++o) {
      size_t at = part_at[o];
      for (size_t k = 0; k < mine.size(); ++k) {
        if (out.rows(k, o) != rows[o][static_cast<size_t>(mine[k])])
          throw Error(ErrorKind::Internal, "data-parallel rank " + std::to_string(r) +
                                               " returned another row count for output '" +
                                               outputs[o].name + "'");
        const size_t bytes = static_cast<size_t>(out.rows(k, o)) * row_bytes[o];
        backend.copy_on_device(sends[r].get() + at, out.item(k, o).data, bytes);
        at += bytes;
      }
    }
    buffers[r] = {sends[r].get(), r == kRoot ? recv.get() : nullptr, backend.stream()};
  });
  comm_->gather(kRoot, buffers, block);

  // Unpack on the root: each rank's rows of an output are contiguous at the
  // start of its part, so one copy per rank and output packs them in rank
  // order; the offsets say where each item landed.
  DeviceBackend& home = *ranks_[kRoot]->backend();
  home.make_current();
  std::vector<std::vector<int64_t>> offsets(num_outputs, std::vector<int64_t>(num_items, 0));
  std::vector<std::vector<int64_t>> rank_first(num_outputs, std::vector<int64_t>(world + 1, 0));
  for (size_t o = 0; o < num_outputs; ++o) {
    int64_t row = 0;
    for (int r = 0; r < world; ++r) {
      rank_first[o][r] = row;
      for (int64_t i : assignment_.rank_items(r)) {
        offsets[o][static_cast<size_t>(i)] = row;
        row += rows[o][static_cast<size_t>(i)];
      }
    }
    rank_first[o][world] = row;
  }
  Result result(ranks_[kRoot]->backend(), outputs, std::move(rows), std::move(offsets));
  for (size_t o = 0; o < num_outputs; ++o)
    for (int r = 0; r < world; ++r) {
      const size_t bytes =
          static_cast<size_t>(rank_first[o][r + 1] - rank_first[o][r]) * row_bytes[o];
      if (bytes == 0) continue;
      home.copy_on_device(static_cast<char*>(result.output_data(o)) +
                              static_cast<size_t>(rank_first[o][r]) * row_bytes[o],
                          recv.get() + static_cast<size_t>(r) * block + part_at[o], bytes);
    }
  // Every write is queued on the root's stream: its copies out and waits
  // then concern this call alone.
  result.mark_written();
  return result;
}

}  // namespace encgraph
