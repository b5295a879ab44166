#include "device_backend.hpp"
#include "process_group/nccl_group.hpp"
#include "rank_block.hpp"

#include <encgraph/distributed_runtime.hpp>
#include <encgraph/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

namespace encgraph {
namespace {

constexpr int kRoot = 0;

// Fields of a control message, '\x1f'-separated (no field holds that byte).
std::string join_fields(const std::vector<std::string>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); ++i) s += (i ? "\x1f" : "") + fields[i];
  return s;
}
std::vector<std::string> split_fields(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '\x1f')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// The counters accumulate() sums, as bytes; names, units and budgets are the
// same on every rank (one plugin, one plan) and stay local.
std::string pack_stats(const Stats& s) {
  std::vector<int64_t> v{s.graph_hits,
                         s.graph_misses,
                         s.real_tokens,
                         s.budget_tokens,
                         s.batches_graph,
                         s.batches_eager,
                         s.batches_mixed,
                         s.batches_eager_chosen,
                         s.graph_memory_bytes,
                         s.num_graphs,
                         static_cast<int64_t>(s.paths.size())};
  // capture_seconds, then the six capture phases, as their bits.
  const CapturePhases& ph = s.capture_phases;
  for (double d : {s.capture_seconds, ph.prepare_device, ph.warmup, ph.capture, ph.instantiate,
                   ph.calibrate, ph.other}) {
    int64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    v.push_back(bits);
  }
  for (const PathStats& p : s.paths) {
    v.push_back(p.graphs);
    v.push_back(p.batches_graph);
    v.push_back(p.batches_eager);
    v.insert(v.end(), p.eager_by_reason.begin(), p.eager_by_reason.end());
    v.push_back(p.real_tokens);
    v.push_back(p.budget_tokens);
  }
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}

Stats unpack_stats(const std::string& bytes, const Stats& like, int rank) {
  std::vector<int64_t> v(bytes.size() / sizeof(int64_t));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(int64_t));
  constexpr size_t kHead = 18, kPath = 5 + kNumEagerReasons;
  if (v.size() < kHead || v.size() != kHead + static_cast<size_t>(v[10]) * kPath ||
      static_cast<size_t>(v[10]) != like.paths.size())
    throw Error(
        ErrorKind::Internal,
        "rank " + std::to_string(rank) +
            " sent statistics of another shape (another plugin, or another encgraph build?)");
  Stats s = like;  // names, units, budgets
  s.graph_hits = v[0];
  s.graph_misses = v[1];
  s.real_tokens = v[2];
  s.budget_tokens = v[3];
  s.batches_graph = v[4];
  s.batches_eager = v[5];
  s.batches_mixed = v[6];
  s.batches_eager_chosen = v[7];
  s.graph_memory_bytes = v[8];
  s.num_graphs = v[9];
  CapturePhases& ph = s.capture_phases;
  double* seconds[] = {&s.capture_seconds, &ph.prepare_device, &ph.warmup, &ph.capture,
                       &ph.instantiate,    &ph.calibrate,      &ph.other};
  for (size_t k = 0; k < 7; ++k) std::memcpy(seconds[k], &v[11 + k], sizeof(double));
  size_t at = kHead;
  for (PathStats& p : s.paths) {
    p.graphs = v[at++];
    p.batches_graph = v[at++];
    p.batches_eager = v[at++];
    for (auto& n : p.eager_by_reason) n = v[at++];
    p.real_tokens = v[at++];
    p.budget_tokens = v[at++];
  }
  return s;
}

// A fingerprint of a request's sizes: ranks that read different files or
// configs would assign differently, and must stop instead.
std::string fingerprint(const std::vector<int64_t>& input_sizes,
                        const std::vector<int64_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t x) {
    for (int b = 0; b < 8; ++b) {
      h ^= static_cast<uint64_t>(x >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (int64_t x : input_sizes) mix(x);
  for (int64_t x : tokens) mix(x);
  return std::to_string(input_sizes.size()) + " items, sizes " + std::to_string(h);
}

}  // namespace

std::string rank_device(const std::string& device, int local_rank, int cuda_devices) {
  const std::string cuda = "cuda:" + std::to_string(local_rank);
  auto need_gpu = [&](const std::string& why) {
    if (local_rank >= cuda_devices)
      throw_config("local rank " + std::to_string(local_rank) + " has no GPU: " + why +
                   " gives each process of a host the CUDA device of its local rank, and this "
                   "host has " +
                   std::to_string(cuda_devices) + (cuda_devices == 1 ? " device" : " devices") +
                   "; start at most that many processes per host, or set runtime.device = "
                   "\"cpu\"");
    return cuda;
  };
  if (device == "cuda:{local_rank}") return need_gpu("runtime.device = \"cuda:{local_rank}\"");
  if (device == "cuda") return need_gpu("runtime.device = \"cuda\"");
  if (device == "auto" || device.empty())
    return cuda_devices > 0 ? need_gpu("runtime.device = \"auto\"") : "cpu";
  return device;
}

std::string rank_device(const std::string& device, int local_rank) {
  return rank_device(device, local_rank, cuda_device_count());
}

void prepare_rank_device(ProcessGroup& group, const std::string& device) {
  const std::string mine = rank_device(device, group.local_rank());
  if (mine == "cpu") {
    if (!group.has_host_gather())
      group.gather_host(nullptr, nullptr, {}, kRoot, "start-up");  // throws its explanation
    return;
  }
  if (mine.rfind("cuda:", 0) == 0) group.set_device(std::stoi(mine.substr(5)));
}

DistributedRuntime::DistributedRuntime(const RuntimeConfig& config,
                                       std::shared_ptr<ProcessGroup> group)
    : group_(std::move(group)) {
  if (!group_) throw Error(ErrorKind::Internal, "a distributed runtime without a process group");
  RuntimeConfig mine = config;
  mine.device = rank_device(config.device, group_->local_rank(), cuda_device_count());
  const bool cuda = mine.device != "cpu";
  prepare_rank_device(*group_, config.device);
  // Before any model is loaded: no two ranks of a host on one GPU, and all
  // ranks CPU or all CUDA.
  const std::string kind = cuda ? "cuda" : "cpu";
  const auto places = group_->exchange(join_fields({host_name(), mine.device, kind}), "start-up");
  std::map<std::string, int> seen;
  for (size_t r = 0; r < places.size(); ++r) {
    const auto f = split_fields(places[r]);
    const auto f0 = split_fields(places[0]);
    if (f.size() != 3 || f0.size() != 3)
      throw Error(ErrorKind::Internal, "rank " + std::to_string(r) + " sent a malformed hello");
    if (f[2] != f0[2])
      throw_config("rank " + std::to_string(r) + " runs on " + f[2] + " but rank 0 on " + f0[2] +
                   ": the ranks of a job must all be CPU or all CUDA (runtime.device)");
    if (f[2] == "cuda") {
      const auto [it, fresh] = seen.emplace(f[0] + " " + f[1], static_cast<int>(r));
      if (!fresh)
        throw_config("ranks " + std::to_string(it->second) + " and " + std::to_string(r) +
                     " both use " + f[1] + " on host " + f[0] +
                     ": give each process its own GPU (runtime.device = \"cuda:{local_rank}\")");
    }
  }
  try {
    local_ = std::make_unique<Runtime>(mine);
  } catch (const Error& e) {
    throw Error(e.kind(), "rank " + std::to_string(group_->rank()) + " on \"" + mine.device +
                              "\": " + e.what());
  }
  // Every rank must run the same plugin build.
  const auto all = group_->exchange(
      join_fields({local_->plugin_name(), local_->plugin_version(), local_->device_name()}),
      "start-up (plugin)");
  const auto f0 = split_fields(all[0]);
  for (size_t r = 0; r < all.size(); ++r) {
    const auto f = split_fields(all[r]);
    if (f.size() != 3 || f0.size() != 3)
      throw Error(ErrorKind::Internal, "rank " + std::to_string(r) + " sent a malformed hello");
    if (f[0] != f0[0] || f[1] != f0[1])
      throw_config("rank " + std::to_string(r) + " runs plugin '" + f[0] + "' " + f[1] +
                   " but rank 0 runs '" + f0[0] + "' " + f0[1] +
                   ": every rank must load the same plugin build (same plugin.name and "
                   "plugin_dirs)");
    const std::string host = split_fields(places[r])[0];
    device_names_.push_back(host != host_name() ? f[2] + " on " + host : f[2]);
  }
  if (cuda) {
    const std::string id =
        group_->share_nccl_id([] { return NcclGroup::unique_id(); }, "start-up (NCCL id)");
    local_->backend()->make_current();
    nccl_ = std::make_unique<NcclGroup>(id, group_->rank(), group_->size(),
                                        std::stoi(mine.device.substr(5)), group_->timeout_s(),
                                        group_.get(), "start-up");
  }
}

DistributedRuntime::~DistributedRuntime() = default;

int DistributedRuntime::world_size() const {
  return group_->size();
}
int DistributedRuntime::process_rank() const {
  return group_->rank();
}

void DistributedRuntime::capture() {
  local_->capture();
  group_->exchange("captured", "capture");  // every rank ready before any is timed
}

bool DistributedRuntime::is_captured() const {
  return local_->is_captured();
}

void DistributedRuntime::synchronize() {
  local_->synchronize();
}

Stats DistributedRuntime::stats() const {
  const Stats mine = local_->stats();
  const auto all = group_->exchange(pack_stats(mine), "statistics");
  Stats sum;
  for (size_t r = 0; r < all.size(); ++r)
    accumulate(sum, unpack_stats(all[r], mine, static_cast<int>(r)));
  return sum;
}

Request DistributedRuntime::prepare(const std::vector<eg_item_desc>& items,
                                    const std::vector<std::string>& labels) {
  return prepare_lazy(items, labels, [](size_t, eg_item_desc&) { return nullptr; });
}

Request DistributedRuntime::prepare_lazy(const std::vector<eg_item_desc>& items,
                                         const std::vector<std::string>& labels,
                                         const PixelLoader& load) {
  const int world = world_size(), me = process_rank();
  const std::string step = "request " + std::to_string(requests_ + 1);
  Request request;
  request.rank_items.resize(static_cast<size_t>(world));
  std::vector<int64_t> input_sizes;
  for (size_t i = 0; i < items.size(); ++i) {
    try {
      const eg_item_spec spec = local_->spec_for(items[i]);
      input_sizes.push_back(spec.input_size);
      request.tokens.push_back(spec.output_tokens);
    } catch (const Error& e) {
      throw Error(e.kind(), item_label(labels, i) + ": " + e.what());
    }
  }
  request.assignment = balance_by_input_size(input_sizes, world);
  // This rank's items, loaded and made on its item threads.
  std::vector<size_t> assigned;
  for (int64_t i : request.assignment.rank_items(me)) assigned.push_back(static_cast<size_t>(i));
  request.rank_items[static_cast<size_t>(me)] = local_->make_items(items, assigned, labels, &load);
  // Every rank has made its items (a barrier before anything is timed), and
  // all assigned the same way.
  const std::string mine = fingerprint(input_sizes, request.tokens);
  const auto all = group_->exchange(mine, step + " (making items)");
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != mine)
      throw_config("rank " + std::to_string(r) + " sees another request than rank " +
                   std::to_string(me) + " (" + all[r] + " against " + mine +
                   "): every rank must read the same config and workload files");
  return request;
}

Result DistributedRuntime::execute(const Request& request, ExecuteMode mode) {
  const int world = world_size(), me = process_rank();
  const std::string step = "request " + std::to_string(++requests_);
  if (static_cast<int>(request.rank_items.size()) != world)
    throw Error(ErrorKind::Internal, "a request prepared for " +
                                         std::to_string(request.rank_items.size()) +
                                         " ranks run on " + std::to_string(world));
  assignment_ = request.assignment;
  const std::vector<int64_t>& tokens = request.tokens;
  const size_t num_items = tokens.size();
  const std::vector<OutputSpec>& outputs = local_->outputs();
  const size_t num_outputs = outputs.size();

  // Rows of item i in output o, in the caller's order.
  std::vector<std::vector<int64_t>> rows(num_outputs, std::vector<int64_t>(num_items));
  std::vector<size_t> row_bytes(num_outputs);
  for (size_t o = 0; o < num_outputs; ++o) {
    row_bytes[o] = static_cast<size_t>(outputs[o].width) * dtype_size(outputs[o].dtype);
    for (size_t i = 0; i < num_items; ++i)
      rows[o][i] = outputs[o].rows_per_item > 0 ? outputs[o].rows_per_item : tokens[i];
  }
  // Rank r's block: each output's rows of its items in assignment order, each
  // output's part 256-aligned. Every rank computes every rank's sizes.
  std::vector<std::vector<size_t>> part_at(static_cast<size_t>(world),
                                           std::vector<size_t>(num_outputs));
  std::vector<size_t> block(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r)
    for (size_t o = 0; o < num_outputs; ++o) {
      int64_t n = 0;
      for (int64_t i : assignment_.rank_items(r)) n += rows[o][static_cast<size_t>(i)];
      part_at[static_cast<size_t>(r)][o] = block[static_cast<size_t>(r)];
      block[static_cast<size_t>(r)] += (static_cast<size_t>(n) * row_bytes[o] + 255) / 256 * 256;
    }

  DeviceBackend& backend = *local_->backend();
  backend.make_current();
  const std::vector<int64_t> mine = assignment_.rank_items(me);
  const Result out = local_->execute(request.rank_items[static_cast<size_t>(me)], mode);
  RankBlock send(backend, block[static_cast<size_t>(me)], "data-parallel send block");
  for (size_t o = 0; o < num_outputs; ++o) {
    size_t at = part_at[static_cast<size_t>(me)][o];
    for (size_t k = 0; k < mine.size(); ++k) {
      if (out.rows(k, o) != rows[o][static_cast<size_t>(mine[k])])
        throw Error(ErrorKind::Internal, "rank " + std::to_string(me) +
                                             " returned another row count for output '" +
                                             outputs[o].name + "' than its item spec said");
      const size_t bytes = static_cast<size_t>(out.rows(k, o)) * row_bytes[o];
      backend.copy_on_device(send.get() + at, out.item(k, o).data, bytes);
      at += bytes;
    }
  }
  size_t total = 0;
  std::vector<size_t> block_at(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r) {
    block_at[static_cast<size_t>(r)] = total;
    total += block[static_cast<size_t>(r)];
  }
  RankBlock recv;
  if (me == kRoot) recv = RankBlock(backend, total, "data-parallel gather");
  try {
    if (nccl_) {
      nccl_->gather(send.get(), recv.get(), block, kRoot, backend.stream(), step + " (rows)");
    } else {
      backend.synchronize();  // the CPU backend's copies are done; nothing is queued
      group_->gather_host(send.get(), recv.get(), block, kRoot, step + " (rows)");
    }
  } catch (...) {
    // A transfer left pending (another rank failed) may still touch them.
    send.release();
    recv.release();
    throw;
  }
  if (me != kRoot)
    return Result(local_->backend(), outputs, std::vector<std::vector<int64_t>>(num_outputs),
                  std::vector<std::vector<int64_t>>(num_outputs));

  // Unpack on the root: rank r's rows of output o are contiguous in its part,
  // and land after the rows of the ranks before it.
  std::vector<std::vector<int64_t>> offsets(num_outputs, std::vector<int64_t>(num_items, 0));
  std::vector<std::vector<int64_t>> rank_first(num_outputs, std::vector<int64_t>(world + 1, 0));
  for (size_t o = 0; o < num_outputs; ++o) {
    int64_t row = 0;
    for (int r = 0; r < world; ++r) {
      rank_first[o][static_cast<size_t>(r)] = row;
      for (int64_t i : assignment_.rank_items(r)) {
        offsets[o][static_cast<size_t>(i)] = row;
        row += rows[o][static_cast<size_t>(i)];
      }
    }
    rank_first[o][static_cast<size_t>(world)] = row;
  }
  Result result(local_->backend(), outputs, std::move(rows), std::move(offsets));
  for (size_t o = 0; o < num_outputs; ++o)
    for (int r = 0; r < world; ++r) {
      const size_t ur = static_cast<size_t>(r);
      const size_t bytes =
          static_cast<size_t>(rank_first[o][ur + 1] - rank_first[o][ur]) * row_bytes[o];
      if (bytes == 0) continue;
      backend.copy_on_device(static_cast<char*>(result.output_data(o)) +
                                 static_cast<size_t>(rank_first[o][ur]) * row_bytes[o],
                             recv.get() + block_at[ur] + part_at[ur][o], bytes);
    }
  // Every write is queued on the root's stream: its copies out and waits
  // then concern this call alone.
  result.mark_written();
  return result;
}

}  // namespace encgraph
