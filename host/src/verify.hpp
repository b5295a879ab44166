// `encgraph verify`'s checks: a workload run through the graphs (memory
// poisoned) against every item run alone eagerly in a shape of exactly its
// size (ExecuteMode::Reference: no padding anywhere), output by output and row by
// row at a tolerance chosen by the output's dtype; the engine's statistics
// checked against what each call must have counted; and, for a mismatch, the
// failing request run again with one buffer's padding logic swapped at a time
// (Runtime::override_padding) to name the buffer whose declared logic is wrong;
// and every item's spec asked for before it was made (Runtime::spec_for)
// against the spec of the item made; and, for a plugin that lets the runtime
// make items on several threads, each request's items made again that way
// against those made one at a time.
#pragma once

#include "workload.hpp"

#include <encgraph/runtime.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace encgraph::host {

// How far a graph's value may lie from the eager one: |graph - eager| <=
// relative * max(1, the largest |eager| of the row). Batching reorders sums
// (other GEMM blocking, other padding), so the error scales with the row's
// magnitude; the floor of 1 makes it absolute for small rows.
struct Tolerance {
  double relative = 0.0;  // 0: exact (integer outputs)
};
// f32 1e-4, f16 5e-3, bf16 4e-2, f64 1e-9, integers exact.
Tolerance tolerance_for(int32_t dtype);

// The first value of one item's output that differs, with both values.
struct ValueDifference {
  int64_t row = 0;
  int64_t column = 0;
  double graph = 0.0;
  double eager = 0.0;
  double allowed = 0.0;  // the tolerance at that row
  std::string why;       // "beyond the tolerance", "NaN in the graph's output only", ...
};

struct Comparison {
  std::optional<ValueDifference> first;  // the first difference, if any
  int64_t rows = 0;                      // rows compared
  int64_t values = 0;                    // values compared
  int64_t nonfinite_both = 0;            // NaN/Inf at the same place in both (counted, allowed)
  double max_abs_diff = 0.0;             // over the finite pairs
};

// Compares one item's output (rows of `width` values, row-major) of a graph
// run against its eager run. Rows counts that differ are a difference at the
// first missing row; NaN or an infinity in one but not the other is one too.
Comparison compare_output(const std::vector<float>& graph, const std::vector<float>& eager,
                          int64_t width, Tolerance tolerance);

// "zero", "repeat-last", "callback" (or the number).
std::string padding_logic_name(int32_t logic);

// What a Planned call over `items` items, or an Eager call over one item, must
// have counted (the delta of stats() around the call); one line per broken
// rule, empty when honest.
std::vector<std::string> check_planned_stats(const Stats& delta, int64_t items);
std::vector<std::string> check_eager_stats(const Stats& delta);

struct VerifyOptions {
  int64_t request_size = 16;
  std::optional<double> tolerance;  // overrides tolerance_for every output
};

// One buffer's declared logic swapped for another, and whether the failing
// request then matched.
struct PaddingTrial {
  std::string buffer;
  int32_t declared = 0;
  int32_t tried = 0;
  bool matches = false;
};

struct Mismatch {
  std::string item;    // the item's id
  size_t request = 0;  // 0-based
  size_t index = 0;    // in its request
  size_t request_items = 0;
  std::string output;
  int32_t dtype = 0;
  ValueDifference difference;
  Stats request_stats;  // what the failing request's Planned call counted
  std::vector<PaddingTrial> trials;
  // s when the item's rows in the batch equal the reference's shifted by s
  // rows (graph row r + s == reference row r): the rows declared per item
  // differ from the rows the forward writes.
  std::optional<int64_t> row_shift;
  // Capture axes: the keys the item's batch ran under and the keys it selects
  // alone; `alone_under_batch_keys_matches`: whether the item alone under the
  // batch's keys still matches its reference (false: the keys do not serve it).
  std::vector<int64_t> batch_axis_keys;
  std::vector<int64_t> own_axis_keys;
  std::optional<bool> alone_under_batch_keys_matches;
};

// A row of a float output that the item-alone reference never wrote: it
// still holds the poison (every byte 0xFF) when the run ends, so the plugin
// declares more rows than its forward writes.
struct UnwrittenRows {
  std::string item;
  std::string output;
  int64_t first_row = 0;
  int64_t rows = 0;       // unwritten rows of that item and output
  int64_t item_rows = 0;  // rows declared for the item
};

// An item whose spec, asked for before the item existed (Runtime::spec_for:
// the plugin's item_spec_for_desc, ABI 1.2, else a synthetic item's), is not
// the spec of the item made: data-parallel ranks would balance on a wrong size.
struct SpecMismatch {
  std::string item;      // the item's id
  eg_item_desc desc{};   // its geometry (pixels NULL)
  eg_item_spec made{};   // item_spec of the item item_create made
  eg_item_spec asked{};  // what spec_for gave (unset when it failed)
  std::string error;     // spec_for's error, when it failed where item_create did not
};

// An item whose output differs when the request's items are made on several
// threads (the plugin declares EG_PLUGIN_CONCURRENT_ITEMS, ABI 1.4) from the
// same request's items made one at a time: the plugin's item making is not
// safe on several threads after all.
struct ConcurrentMismatch {
  std::string item;  // the item's id
  std::string output;
  int threads = 0;             // the threads the items were made on
  ValueDifference difference;  // `graph`: made on threads; `eager`: made one at a time
};

// "image 448x448" / "video 4 frames of 224x336" (with the modality's number
// when unknown).
std::string geometry_text(const eg_item_desc& desc);
// "input_size 1024, output_tokens 256, frames 1, path_tokens [256]" (the
// first `num_paths` path counts).
std::string spec_text(const eg_item_spec& spec, int num_paths);
// Whether two specs agree on every field the runtime reads.
bool same_spec(const eg_item_spec& a, const eg_item_spec& b, int num_paths);
// The spec `runtime` promises for `desc` before making it, against `made`;
// nullopt when they agree.
std::optional<SpecMismatch> check_spec(Runtime& runtime, const std::string& item,
                                       const eg_item_desc& desc, const eg_item_spec& made);

struct VerifyResult {
  int64_t items = 0;
  int64_t requests = 0;
  size_t outputs = 0;
  int64_t rows = 0;
  int64_t values = 0;
  int64_t nonfinite_both = 0;
  double max_abs_diff = 0.0;
  int64_t items_differing = 0;
  Stats planned;  // the Planned calls' statistics, summed
  std::optional<Mismatch> mismatch;
  std::optional<UnwrittenRows> unwritten;  // the first item with unwritten reference rows
  int64_t items_unwritten = 0;
  std::vector<std::string> stats_problems;  // the first few broken statistics rules
  int64_t stats_problem_count = 0;
  std::optional<SpecMismatch> spec_mismatch;  // the first item whose spec_for differs
  int64_t spec_mismatches = 0;                // items whose spec_for differs
  // Items made again on the runtime's item threads (plugins declaring
  // EG_PLUGIN_CONCURRENT_ITEMS) and run the same way: those checked, the most
  // threads used, and the first whose output differed.
  int64_t concurrent_items_checked = 0;
  int concurrent_threads = 0;
  std::optional<ConcurrentMismatch> concurrent_mismatch;
  int64_t concurrent_mismatches = 0;
};

// Runs `work` on `runtime` (captured, memory poisoned, use_graphs on) and
// compares; reports progress through the log.
VerifyResult verify_workload(Runtime& runtime, const std::vector<WorkItem>& work,
                             const VerifyOptions& options);

}  // namespace encgraph::host
