#include "verify.hpp"

#include "executor.hpp"
#include "progress.hpp"

#include <encgraph/error.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

namespace encgraph::host {
namespace {

constexpr size_t kMaxStatsProblems = 5;

// A request's eager references: [item][output] as floats.
using Outputs = std::vector<std::vector<std::vector<float>>>;

std::vector<const Item*> pointers(const std::vector<Item>& items) {
  std::vector<const Item*> p;
  for (const Item& item : items) p.push_back(&item);
  return p;
}

Tolerance tolerance_of(const OutputSpec& output, const VerifyOptions& options) {
  return options.tolerance ? Tolerance{*options.tolerance} : tolerance_for(output.dtype);
}

// Whether every item of `result` matches its reference in every output.
bool all_match(const Result& result, const Outputs& eager, const std::vector<OutputSpec>& outputs,
               const VerifyOptions& options) {
  for (size_t i = 0; i < result.size(); ++i)
    for (size_t o = 0; o < outputs.size(); ++o)
      if (compare_output(result.item_as_float(i, o), eager[i][o], outputs[o].width,
                         tolerance_of(outputs[o], options))
              .first)
        return false;
  return true;
}

// The request run again with each buffer's padding logic swapped for another
// (zero <-> repeat-last; a callback buffer tries both), one buffer at a time.
std::vector<PaddingTrial> try_other_paddings(Runtime& runtime, const std::vector<Item>& items,
                                             const Outputs& eager, const VerifyOptions& options) {
  std::vector<PaddingTrial> trials;
  const eg_model_info& info = runtime.model_info();
  for (int b = 0; b < info.num_buffers; ++b) {
    const eg_buffer_info& buffer = info.buffers[b];
    std::vector<int32_t> others;
    if (buffer.padding_logic != EG_PAD_ZERO) others.push_back(EG_PAD_ZERO);
    if (buffer.padding_logic != EG_PAD_REPEAT_LAST) others.push_back(EG_PAD_REPEAT_LAST);
    for (int32_t logic : others) {
      PaddingTrial trial{buffer.name ? buffer.name : "", buffer.padding_logic, logic, false};
      try {
        runtime.override_padding(trial.buffer, static_cast<eg_padding_logic>(logic));
        const Result result = runtime.execute(pointers(items), ExecuteMode::Planned);
        trial.matches = all_match(result, eager, runtime.outputs(), options);
      } catch (const Error&) {
        // The plugin refusing the other padding (a check of its own) is no match.
        trial.matches = false;
      }
      runtime.clear_padding_overrides();
      trials.push_back(trial);
    }
  }
  return trials;
}

// Rows of item i's output o (a float dtype) whose every byte is 0xFF: the
// poison the runtime writes before each run, so no forward wrote them.
// Returns {first row, count}; count 0 when every row was written.
std::pair<int64_t, int64_t> poisoned_rows(const Result& r, size_t i, size_t o) {
  const int32_t dtype = r.dtype(o);
  if (dtype != EG_DTYPE_F32 && dtype != EG_DTYPE_BF16 && dtype != EG_DTYPE_F16 &&
      dtype != EG_DTYPE_F64)
    return {0, 0};  // an integer row of -1 is a value
  const std::vector<uint8_t> host = r.to_host(o);
  const size_t row_bytes =
      host.empty() || r.total_rows(o) == 0 ? 0 : host.size() / static_cast<size_t>(r.total_rows(o));
  const size_t start = r.host_offset(i, o);
  int64_t first = -1, count = 0;
  for (int64_t row = 0; row < r.rows(i, o); ++row) {
    const uint8_t* p = host.data() + start + static_cast<size_t>(row) * row_bytes;
    if (row_bytes == 0 || !std::all_of(p, p + row_bytes, [](uint8_t b) { return b == 0xFF; }))
      continue;
    if (first < 0) first = row;
    ++count;
  }
  return {std::max<int64_t>(first, 0), count};
}

// The shift s under which the graph's rows equal the reference's (graph row
// r + s against reference row r), over at least two common rows and half the
// reference's: a rows-per-item count that differs from what the forward writes
// moves each item by that difference times the items before it in its batch.
std::optional<int64_t> find_row_shift(const std::vector<float>& graph,
                                      const std::vector<float>& reference, int64_t width,
                                      Tolerance tolerance) {
  const size_t w = static_cast<size_t>(std::max<int64_t>(width, 1));
  const int64_t g_rows = static_cast<int64_t>(graph.size() / w);
  const int64_t r_rows = static_cast<int64_t>(reference.size() / w);
  const auto row = [&](const std::vector<float>& v, int64_t r) {
    return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(r * w),
                              v.begin() + static_cast<std::ptrdiff_t>((r + 1) * w));
  };
  const int64_t min_overlap = std::max<int64_t>(2, (r_rows + 1) / 2);
  for (int64_t step = 1; step < std::max(g_rows, r_rows); ++step)
    for (int64_t s : {step, -step}) {
      const int64_t lo = std::max<int64_t>(0, -s), hi = std::min(r_rows, g_rows - s);
      if (hi - lo < min_overlap) continue;
      bool all = true;
      for (int64_t r = lo; r < hi && all; ++r)
        all = !compare_output(row(graph, r + s), row(reference, r), width, tolerance).first;
      if (all) return s;
    }
  return std::nullopt;
}

// The failing item alone under the keys its batch ran under: whether it still
// matches its own reference (a plugin whose batch keys do not cover every
// item of the batch computes that item under the wrong keys).
void try_batch_axis_keys(Runtime& runtime, const Item& item, Mismatch& m,
                         const std::vector<float>& reference, size_t output,
                         const VerifyOptions& options) {
  if (m.batch_axis_keys.empty() || m.batch_axis_keys == m.own_axis_keys) return;
  try {
    runtime.force_axis_keys(m.batch_axis_keys);
    const Result r = runtime.execute(std::vector<const Item*>{&item}, ExecuteMode::Reference);
    runtime.force_axis_keys(std::nullopt);
    const OutputSpec& spec = runtime.outputs()[output];
    m.alone_under_batch_keys_matches = !compare_output(r.item_as_float(0, output), reference,
                                                       spec.width, tolerance_of(spec, options))
                                            .first;
  } catch (const Error&) {
    runtime.force_axis_keys(std::nullopt);
    m.alone_under_batch_keys_matches = false;  // the plugin refuses them for this item
  }
}

void add_problems(VerifyResult& result, const std::vector<std::string>& problems,
                  const std::string& where) {
  for (const std::string& p : problems) {
    if (result.stats_problems.size() < kMaxStatsProblems)
      result.stats_problems.push_back(where + ": " + p);
    ++result.stats_problem_count;
  }
}

// The request's items made again on the runtime's item threads and run the
// same way (Planned) must give what the items made one at a time gave.
void check_concurrent_items(Runtime& runtime, const std::vector<WorkItem>& work, size_t first,
                            size_t last, const Result& serial, const VerifyOptions& options,
                            VerifyResult& result) {
  const size_t n = last - first;
  const int threads = runtime.item_threads(n);
  if (threads < 2) return;
  std::vector<const WorkItem*> request;
  for (size_t i = first; i < last; ++i) request.push_back(&work[i]);
  const std::vector<Item> items = make_items(runtime, request);
  const Result again = runtime.execute(pointers(items), ExecuteMode::Planned);
  const std::vector<OutputSpec>& outputs = runtime.outputs();
  result.concurrent_items_checked += static_cast<int64_t>(n);
  result.concurrent_threads = std::max(result.concurrent_threads, threads);
  for (size_t i = 0; i < n; ++i) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Comparison c = compare_output(again.item_as_float(i, o), serial.item_as_float(i, o),
                                          outputs[o].width, tolerance_of(outputs[o], options));
      if (!c.first) continue;
      ++result.concurrent_mismatches;
      if (!result.concurrent_mismatch)
        result.concurrent_mismatch =
            ConcurrentMismatch{work[first + i].id, outputs[o].name, threads, *c.first};
      break;
    }
  }
}

// The Planned calls' counters summed (the eager calls between them are not).
void add_counts(Stats& sum, const Stats& d) {
  sum.graph_hits += d.graph_hits;
  sum.graph_misses += d.graph_misses;
  sum.batches_graph += d.batches_graph;
  sum.batches_eager += d.batches_eager;
  sum.batches_mixed += d.batches_mixed;
  sum.real_tokens += d.real_tokens;
  sum.budget_tokens += d.budget_tokens;
  const int64_t total = sum.graph_hits + sum.graph_misses;
  sum.hit_rate = total > 0 ? static_cast<double>(sum.graph_hits) / static_cast<double>(total) : 0;
}

std::string count(const char* what, int64_t value) {
  return std::string(what) + " " + std::to_string(value);
}

// A work item's geometry as the plugin sees it, before any file is decoded:
// the workload probed every file's size (and decoding checks it is unchanged).
eg_item_desc geometry_of(const WorkItem& w) {
  eg_item_desc desc{};
  desc.modality = w.modality;
  desc.channels = 3;
  desc.height = w.height;
  desc.width = w.width;
  desc.frames = w.frames;
  desc.seed = w.seed;
  return desc;
}

}  // namespace

Tolerance tolerance_for(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32: return {1e-4};
    case EG_DTYPE_F16: return {5e-3};
    case EG_DTYPE_BF16: return {4e-2};
    case EG_DTYPE_F64: return {1e-9};
    default: return {0.0};
  }
}

Comparison compare_output(const std::vector<float>& graph, const std::vector<float>& eager,
                          int64_t width, Tolerance tolerance) {
  Comparison c;
  const size_t w = static_cast<size_t>(std::max<int64_t>(width, 1));
  const size_t graph_rows = graph.size() / w, eager_rows = eager.size() / w;
  const size_t rows = std::min(graph_rows, eager_rows);
  for (size_t r = 0; r < rows; ++r) {
    double scale = 1.0;
    for (size_t k = 0; k < w; ++k)
      if (std::isfinite(eager[r * w + k]))
        scale = std::max(scale, std::fabs(static_cast<double>(eager[r * w + k])));
    const double allowed = tolerance.relative * scale;
    ++c.rows;
    for (size_t k = 0; k < w; ++k) {
      const double g = graph[r * w + k], e = eager[r * w + k];
      ++c.values;
      std::string why;
      if (std::isfinite(g) && std::isfinite(e)) {
        const double d = std::fabs(g - e);
        c.max_abs_diff = std::max(c.max_abs_diff, d);
        if (d > allowed) why = "beyond the tolerance";
      } else if ((std::isnan(g) && std::isnan(e)) || g == e) {
        ++c.nonfinite_both;  // the same NaN or infinity in both
      } else {
        why =
            std::isfinite(e)
                ? std::string(std::isnan(g) ? "NaN" : "an infinity") + " in the graph's output only"
                : std::string(std::isnan(e) ? "NaN" : "an infinity") + " in the eager output only";
      }
      if (!why.empty() && !c.first)
        c.first =
            ValueDifference{static_cast<int64_t>(r), static_cast<int64_t>(k), g, e, allowed, why};
    }
  }
  if (graph_rows != eager_rows && !c.first)
    c.first = ValueDifference{static_cast<int64_t>(rows),
                              0,
                              0.0,
                              0.0,
                              0.0,
                              "the graph gives " + std::to_string(graph_rows) +
                                  " rows, the eager run " + std::to_string(eager_rows)};
  return c;
}

std::string padding_logic_name(int32_t logic) {
  switch (logic) {
    case EG_PAD_ZERO: return "zero";
    case EG_PAD_REPEAT_LAST: return "repeat-last";
    case EG_PAD_CALLBACK: return "callback";
    default: return "logic " + std::to_string(logic);
  }
}

std::vector<std::string> check_planned_stats(const Stats& d, int64_t items) {
  std::vector<std::string> p;
  const int64_t batches = d.batches_graph + d.batches_eager + d.batches_mixed;
  // prefer_faster_path is off under verify: every item is a hit or a miss.
  if (d.graph_hits + d.graph_misses != items)
    p.push_back(count("graph_hits", d.graph_hits) + " + " + count("graph_misses", d.graph_misses) +
                " for " + std::to_string(items) + " items");
  if (d.graph_hits < 0 || d.graph_misses < 0 || batches <= 0)
    p.push_back("negative counts or no batch counted");
  if (d.batches_eager_chosen != 0)
    p.push_back(count("batches_eager_chosen", d.batches_eager_chosen) +
                " with prefer_faster_path off");
  if (d.graph_hits > 0 && d.batches_graph + d.batches_mixed == 0)
    p.push_back(count("graph_hits", d.graph_hits) + " but no batch replayed a graph");
  if (d.graph_misses > 0 && d.batches_eager + d.batches_mixed == 0)
    p.push_back(count("graph_misses", d.graph_misses) + " but no batch ran eagerly");
  if (d.batches_mixed > 0 && d.paths.size() < 2)
    p.push_back(count("batches_mixed", d.batches_mixed) + " with one path");
  if (d.real_tokens > d.budget_tokens)
    p.push_back(count("real_tokens", d.real_tokens) + " > " +
                count("budget_tokens", d.budget_tokens));
  for (const PathStats& path : d.paths) {
    const std::string name = "path '" + path.name + "': ";
    int64_t reasons = 0;
    for (int64_t n : path.eager_by_reason) reasons += n;
    if (reasons != path.batches_eager)
      p.push_back(name + "eager reasons sum to " + std::to_string(reasons) + ", " +
                  count("batches_eager", path.batches_eager));
    if (path.eager_by_reason[static_cast<int>(EagerReason::GraphsOff)] != 0)
      p.push_back(name + "batches counted as 'graphs off' after capture");
    if (path.batches_graph + path.batches_eager > batches)
      p.push_back(name + "more batches (" + std::to_string(path.batches_graph) + " graph, " +
                  std::to_string(path.batches_eager) + " eager) than the call's " +
                  std::to_string(batches));
    if (path.real_tokens > path.budget_tokens)
      p.push_back(name + count("real_tokens", path.real_tokens) + " > " +
                  count("budget_tokens", path.budget_tokens));
  }
  if (d.paths.size() == 1 &&
      (d.paths[0].batches_graph != d.batches_graph || d.paths[0].batches_eager != d.batches_eager))
    p.push_back("the one path's batches (" + std::to_string(d.paths[0].batches_graph) + " graph, " +
                std::to_string(d.paths[0].batches_eager) + " eager) differ from the totals (" +
                std::to_string(d.batches_graph) + ", " + std::to_string(d.batches_eager) + ")");
  return p;
}

std::vector<std::string> check_eager_stats(const Stats& d) {
  std::vector<std::string> p;
  if (d.graph_hits != 0 || d.graph_misses != 1)
    p.push_back(count("graph_hits", d.graph_hits) + ", " + count("graph_misses", d.graph_misses) +
                " for one item run eagerly (want 0 and 1)");
  if (d.batches_graph != 0 || d.batches_mixed != 0 || d.batches_eager != 1)
    p.push_back(count("batches_graph", d.batches_graph) + ", " +
                count("batches_mixed", d.batches_mixed) + ", " +
                count("batches_eager", d.batches_eager) + " for one eager batch");
  if (d.real_tokens != 0 || d.budget_tokens != 0)
    p.push_back("an eager batch counted graph tokens");
  for (const PathStats& path : d.paths) {
    const int64_t off = path.eager_by_reason[static_cast<int>(EagerReason::GraphsOff)];
    if (path.batches_graph != 0 || path.batches_eager > 1 || off != path.batches_eager)
      p.push_back("path '" + path.name + "': " + count("batches_graph", path.batches_graph) + ", " +
                  count("batches_eager", path.batches_eager) + ", 'graphs off' " +
                  std::to_string(off) + " for one eager batch");
  }
  return p;
}

std::string geometry_text(const eg_item_desc& d) {
  const std::string size = std::to_string(d.height) + "x" + std::to_string(d.width);
  if (d.modality == EG_MODALITY_IMAGE && d.frames == 1) return "image " + size;
  const std::string what = d.modality == EG_MODALITY_VIDEO ? "video"
                           : d.modality == EG_MODALITY_IMAGE
                               ? "image"
                               : "modality " + std::to_string(d.modality);
  return what + " " + std::to_string(d.frames) + " frames of " + size;
}

std::string spec_text(const eg_item_spec& s, int num_paths) {
  std::string out = "input_size " + std::to_string(s.input_size) + ", output_tokens " +
                    std::to_string(s.output_tokens) + ", frames " + std::to_string(s.frames) +
                    ", path_tokens [";
  for (int p = 0; p < num_paths && p < EG_MAX_PATHS; ++p)
    out += (p ? ", " : "") + std::to_string(s.path_tokens[p]);
  return out + "]";
}

bool same_spec(const eg_item_spec& a, const eg_item_spec& b, int num_paths) {
  if (a.input_size != b.input_size || a.output_tokens != b.output_tokens || a.frames != b.frames)
    return false;
  for (int p = 0; p < num_paths && p < EG_MAX_PATHS; ++p)
    if (a.path_tokens[p] != b.path_tokens[p]) return false;
  return true;
}

std::optional<SpecMismatch> check_spec(Runtime& runtime, const std::string& item,
                                       const eg_item_desc& desc, const eg_item_spec& made) {
  SpecMismatch m;
  m.item = item;
  m.desc = desc;
  m.desc.pixels = nullptr;
  m.made = made;
  try {
    m.asked = runtime.spec_for(m.desc);
    if (same_spec(m.asked, made, runtime.model_info().num_paths)) return std::nullopt;
  } catch (const Error& e) {
    m.error = e.what();
  }
  return m;
}

VerifyResult verify_workload(Runtime& runtime, const std::vector<WorkItem>& work,
                             const VerifyOptions& options) {
  VerifyResult result;
  const std::vector<OutputSpec>& outputs = runtime.outputs();
  result.outputs = outputs.size();
  const size_t request_size = static_cast<size_t>(std::max<int64_t>(options.request_size, 1));
  // The first failing request, kept for the diagnosis.
  std::vector<Item> failing_items;
  Outputs failing_eager;
  Progress progress("verify", static_cast<int64_t>(work.size()));
  for (size_t first = 0, r = 0; first < work.size(); first += request_size, ++r) {
    const size_t last = std::min(work.size(), first + request_size);
    std::vector<Item> items;
    for (size_t i = first; i < last; ++i) {
      items.push_back(make_item(runtime, work[i]));
      auto spec = check_spec(runtime, work[i].id, geometry_of(work[i]), items.back().spec());
      if (!spec) continue;
      ++result.spec_mismatches;
      if (!result.spec_mismatch) result.spec_mismatch = std::move(spec);
    }
    const int64_t n = static_cast<int64_t>(items.size());

    const Stats before = runtime.stats();
    const Result graph = runtime.execute(pointers(items), ExecuteMode::Planned);
    const Stats request_stats = stats_delta(runtime.stats(), before);
    add_problems(result, check_planned_stats(request_stats, n),
                 "request " + std::to_string(r + 1) + " (planned)");
    add_counts(result.planned, request_stats);

    Outputs eager(items.size());
    bool request_failed = false;
    for (size_t i = 0; i < items.size(); ++i) {
      const Stats alone_before = runtime.stats();
      const Result alone =
          runtime.execute(std::vector<const Item*>{&items[i]}, ExecuteMode::Reference);
      add_problems(result, check_eager_stats(stats_delta(runtime.stats(), alone_before)),
                   "item '" + work[first + i].id + "' (eager)");
      bool item_failed = false, item_unwritten = false;
      for (size_t o = 0; o < outputs.size(); ++o) {
        eager[i].push_back(alone.item_as_float(0, o));
        const auto [first_row, unwritten] = poisoned_rows(alone, 0, o);
        if (unwritten > 0 && !item_unwritten) {
          item_unwritten = true;
          ++result.items_unwritten;
          if (!result.unwritten)
            result.unwritten = UnwrittenRows{work[first + i].id, outputs[o].name, first_row,
                                             unwritten, alone.rows(0, o)};
        }
        const Comparison c = compare_output(graph.item_as_float(i, o), eager[i][o],
                                            outputs[o].width, tolerance_of(outputs[o], options));
        result.rows += c.rows;
        result.values += c.values;
        result.nonfinite_both += c.nonfinite_both;
        result.max_abs_diff = std::max(result.max_abs_diff, c.max_abs_diff);
        if (!c.first || item_failed) continue;
        item_failed = true;
        if (result.mismatch) continue;
        Mismatch m;
        m.item = work[first + i].id;
        m.request = r;
        m.index = i;
        m.request_items = items.size();
        m.output = outputs[o].name;
        m.dtype = outputs[o].dtype;
        m.difference = *c.first;
        m.request_stats = request_stats;
        m.row_shift = find_row_shift(graph.item_as_float(i, o), eager[i][o], outputs[o].width,
                                     tolerance_of(outputs[o], options));
        m.batch_axis_keys = graph.axis_keys(i);
        m.own_axis_keys = alone.axis_keys(0);
        try_batch_axis_keys(runtime, items[i], m, eager[i][o], o, options);
        result.mismatch = std::move(m);
        request_failed = true;
      }
      result.items_differing += item_failed;
    }
    check_concurrent_items(runtime, work, first, last, graph, options, result);
    if (request_failed) {
      failing_items = std::move(items);
      failing_eager = std::move(eager);
    }
    result.items += n;
    result.requests += 1;
    progress.update(result.items);
  }
  progress.finish();
  if (result.mismatch)
    result.mismatch->trials = try_other_paddings(runtime, failing_items, failing_eager, options);
  return result;
}

}  // namespace encgraph::host
