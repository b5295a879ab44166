// `encgraph verify`: the config's workload through the graphs and every item
// alone eagerly, memory poisoned, compared row by row (verify.hpp); prints OK
// with the counts, or the first item, output, row and column that differ with
// the padding logic of every buffer and which swapped logic makes the batch
// match; and whether every item's spec, asked for before it was made, is the
// made item's. Exit 0 when everything matches, 1 for a mismatch, a spec
// mismatch or dishonest statistics (a plugin or runtime bug), 2 for a bad
// config or input. Writes nothing.
#include "cli.hpp"
#include "commands.hpp"
#include "verify.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace encgraph::host {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string percent(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * v);
  return buf;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string tolerance_text(const std::vector<OutputSpec>& outputs, const VerifyOptions& options) {
  if (options.tolerance) return number(*options.tolerance) + " (--tolerance)";
  std::string s;
  for (const OutputSpec& o : outputs) {
    const std::string t =
        o.name + " " + dtype_name(o.dtype) + " " + number(tolerance_for(o.dtype).relative);
    s += (s.empty() ? "" : ", ") + t;
  }
  return s + " (x max(1, the row's largest |value|))";
}

std::string batches_text(const Stats& s) {
  return std::to_string(s.batches_graph) + " graph, " + std::to_string(s.batches_eager) +
         " eager, " + std::to_string(s.batches_mixed) + " mixed";
}

void print_buffers(std::ostream& out, const Runtime& runtime) {
  const eg_model_info& info = runtime.model_info();
  out << "  buffers (padding logic):";
  if (info.num_buffers == 0) out << " none";
  for (int b = 0; b < info.num_buffers; ++b)
    out << (b ? ", " : " ") << (info.buffers[b].name ? info.buffers[b].name : "?") << " ("
        << padding_logic_name(info.buffers[b].padding_logic) << ")";
  out << "\n";
}

void print_mismatch(std::ostream& out, const Runtime& runtime, const VerifyResult& r,
                    int64_t request_size) {
  const Mismatch& m = *r.mismatch;
  const ValueDifference& d = m.difference;
  out << "MISMATCH: item '" << m.item << "' (request " << m.request + 1 << ", item " << m.index + 1
      << " of " << m.request_items << "), output '" << m.output << "' (" << dtype_name(m.dtype)
      << "), row " << d.row << ", column " << d.column << ": graph " << number(d.graph)
      << ", eager " << number(d.eager);
  if (d.why == "beyond the tolerance")
    out << ", |difference| " << number(std::fabs(d.graph - d.eager)) << " > tolerance "
        << number(d.allowed);
  else
    out << " (" << d.why << ")";
  out << "\n";
  out << "  " << r.items_differing << " of " << r.items << " items differ; the failing request's "
      << m.request_items << " items (requests of " << request_size
      << ") ran in batches: " << batches_text(m.request_stats) << "\n";
  print_buffers(out, runtime);
  if (m.row_shift)
    out << "diagnosis: the item's rows in its batch equal its reference's shifted by "
        << *m.row_shift << " row" << (std::abs(*m.row_shift) == 1 ? "" : "s")
        << ": the rows the plugin declares per item (item_spec output_tokens, or the output's "
           "rows_per_item) differ from the rows its forward writes (each item moves by the "
           "difference times the items before it in its batch)\n";
  if (m.alone_under_batch_keys_matches && !*m.alone_under_batch_keys_matches)
    out << "diagnosis: the batch ran under capture-axis keys " << list(m.batch_axis_keys)
        << ", but the item alone selects " << list(m.own_axis_keys)
        << " and under the batch's keys computes other values: select_axis_keys must return "
           "keys that serve every item of the batch (e.g. the largest any item needs)\n";
  out << "diagnosis (the failing request run again through its graphs, one buffer's padding "
         "logic swapped at a time):\n";
  bool found = false;
  for (const PaddingTrial& t : m.trials) {
    if (!t.matches) continue;
    found = true;
    out << "  buffer '" << t.buffer << "' is declared " << padding_logic_name(t.declared)
        << " padding; with " << padding_logic_name(t.tried)
        << " padding the batch matches: the plugin's padding logic is probably wrong\n";
  }
  if (m.trials.empty())
    out << "  the plugin declares no buffers: the difference is in its forward at a budget's "
           "size (compare it with the eager path)\n";
  else if (!found && (m.row_shift ||
                      (m.alone_under_batch_keys_matches && !*m.alone_under_batch_keys_matches)))
    out << "  no buffer's other padding logic makes the batch match, as expected for the "
           "diagnosis above\n";
  else if (!found)
    out << "  no buffer's other padding logic makes the batch match: the difference is not one "
           "buffer's padding logic (look for rows the forward reads past an item's end, or "
           "state shared between the items of a batch)\n";
  if (m.request_stats.batches_graph + m.request_stats.batches_mixed == 0)
    out << "  the failing request replayed no graph: its batches ran eagerly, so the "
           "difference comes from batching several items, not from a graph\n";
}

// Rows the item-alone reference never wrote: the plugin declares more rows
// than its forward writes, and those rows would reach users as garbage.
void print_unwritten(std::ostream& out, const VerifyResult& r) {
  const UnwrittenRows& u = *r.unwritten;
  out << "UNWRITTEN: item '" << u.item << "', output '" << u.output << "': " << u.rows << " of its "
      << u.item_rows << " rows (the first: row " << u.first_row
      << ") were never written by its forward run alone (they still hold the poison); "
      << r.items_unwritten << " of " << r.items
      << " items have such rows. The plugin declares more rows than its forward writes: check "
         "item_spec's output_tokens, the output's rows_per_item and output_shape\n";
}

// An item's spec asked for before it existed differs from the made item's: a
// plugin bug that would balance data-parallel ranks on wrong sizes.
void print_spec_mismatch(std::ostream& out, const Runtime& runtime, const VerifyResult& r) {
  const SpecMismatch& m = *r.spec_mismatch;
  const int paths = runtime.model_info().num_paths;
  const std::string source = runtime.has_spec_for_desc()
                                 ? "item_spec_for_desc"
                                 : "a synthetic item's spec (the plugin has no "
                                   "item_spec_for_desc, ABI 1.2)";
  out << "SPEC MISMATCH: plugin '" << runtime.plugin_name() << "', item '" << m.item << "' ("
      << geometry_text(m.desc) << "): ";
  if (!m.error.empty())
    out << source << " failed where item_create succeeded: " << m.error << "\n";
  else
    out << source << " gives " << spec_text(m.asked, paths) << "; the item item_create made has "
        << spec_text(m.made, paths) << "\n";
  out << "  " << r.spec_mismatches << " of " << r.items
      << " items differ; the spec from an item's description must equal the made item's, as "
         "data-parallel ranks balance on it before decoding (fix the plugin: compute both from "
         "one function of the geometry)\n";
}

// Items made on several threads give other outputs than the same items made
// one at a time: the plugin's EG_PLUGIN_CONCURRENT_ITEMS promise is broken.
void print_concurrent_mismatch(std::ostream& out, const Runtime& runtime, const VerifyResult& r) {
  const ConcurrentMismatch& m = *r.concurrent_mismatch;
  out << "CONCURRENT ITEMS: plugin '" << runtime.plugin_name() << "', item '" << m.item
      << "', output '" << m.output << "': made on " << m.threads << " threads it gives "
      << number(m.difference.graph) << " at row " << m.difference.row << ", column "
      << m.difference.column << ", made one at a time " << number(m.difference.eager) << " ("
      << m.difference.why << ")\n";
  out << "  " << r.concurrent_mismatches << " of " << r.concurrent_items_checked
      << " items differ. The plugin declares EG_PLUGIN_CONCURRENT_ITEMS (ABI 1.4; the SDK's "
         "concurrent_items) but its item_create shares state between calls: lock it, or drop "
         "the flag (runtime.item_threads = 1 works around it)\n";
}

}  // namespace

int verify_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: encgraph verify --config FILE [--set KEY=VALUE]... [--tolerance T]\n"
      "runs the workload through the graphs, then every item alone eagerly, with memory "
      "poisoned,\nand compares every output row (exit 0 all match, 1 a mismatch, 2 bad "
      "config or input)";
  po::options_description opts("encgraph verify options");
  add_config_options(opts);
  opts.add_options()("tolerance", po::value<double>()->value_name("T"),
                     "relative tolerance for every output instead of the dtype's (f32 1e-4, "
                     "f16 5e-3, bf16 4e-2), times max(1, the row's largest |value|)");
  po::variables_map vm;
  if (auto rc = parse_command_line("verify", usage, args, opts, nullptr, vm)) return *rc;
  VerifyOptions options;
  if (vm.count("tolerance")) {
    const double t = vm["tolerance"].as<double>();
    if (!std::isfinite(t) || t < 0)
      throw_config("--tolerance " + number(t) +
                   ": the tolerance must be a finite number >= 0 (e.g. 1e-4)");
    options.tolerance = t;
  }

  HostConfig config = load_command_config(vm);
  // verify writes nothing: the outputs are neither checked nor written.
  const std::vector<WorkItem> work = build_workload(config.workload, config.limits);
  require_items(work, config.workload, "verify");
  options.request_size = config.workload.request_size;

  RuntimeConfig rc = config.runtime;
  rc.poison_memory = true;  // rows nobody wrote read as NaN in one mode
  // Every batch that fits a graph replays it: an eager choice would hide the graph.
  rc.prefer_faster_path = false;
  std::vector<std::string> notes;
  if (!rc.use_graphs) notes.push_back("captures graphs although runtime.use_graphs = false");
  rc.use_graphs = true;
  if (!config.data_parallel.empty()) {
    // Every rank runs the same graphs; padding overrides are one runtime's.
    rc.device = config.data_parallel.front();
    notes.push_back("runtime.data_parallel: runs on the first rank's device (" + rc.device +
                    ") alone");
  }
  auto runtime = make_runtime(rc);
  check_workload_supported(*runtime, work);
  runtime->capture();
  const BudgetPlan& plan = runtime->plan();
  std::cout << "verify: plugin " << runtime->plugin_name() << " " << runtime->plugin_version()
            << " on " << runtime->device_name() << ", " << work.size() << " items in requests of "
            << options.request_size << ", budgets " << list(plan.token_budgets)
            << ", memory poisoned\n";
  std::cout << "  tolerance: " << tolerance_text(runtime->outputs(), options) << "\n";
  for (const std::string& note : notes) std::cout << "  note: " << note << "\n";

  const VerifyResult r = verify_workload(*runtime, work, options);
  int rc_exit = kExitOk;
  if (r.mismatch) {
    print_mismatch(std::cout, *runtime, r, options.request_size);
    rc_exit = kExitFailure;
  } else {
    // Rows never written fail the run even where both runs agree on them.
    std::cout << (r.unwritten ? "AGREE (see UNWRITTEN below): " : "OK: ") << r.items << " items, "
              << r.outputs << " output" << (r.outputs == 1 ? "" : "s") << " (";
    for (size_t o = 0; o < runtime->outputs().size(); ++o)
      std::cout << (o ? ", " : "") << runtime->outputs()[o].name;
    std::cout << "), " << r.rows << " rows (" << r.values
              << " values) compared, max |graph - eager| " << number(r.max_abs_diff)
              << ", graph hit rate " << percent(r.planned.hit_rate)
              << "; batches: " << batches_text(r.planned) << "\n";
    print_buffers(std::cout, *runtime);
    if (r.planned.graph_hits == 0)
      std::cout << "  warning: no item replayed a graph, so no graph was checked (are the "
                   "budgets smaller than the items?)\n";
  }
  if (r.unwritten) {
    print_unwritten(std::cout, r);
    rc_exit = kExitFailure;
  }
  if (r.nonfinite_both > 0)
    std::cout << "  warning: " << r.nonfinite_both
              << " values are NaN or infinite in both modes (rows the plugin never writes read "
                 "as NaN under poisoned memory)\n";
  if (r.spec_mismatch) {
    print_spec_mismatch(std::cout, *runtime, r);
    rc_exit = kExitFailure;
  } else {
    std::cout << "  specs: "
              << (runtime->has_spec_for_desc() ? "item_spec_for_desc" : "a synthetic item")
              << " gave every item's spec before it was made\n";
  }
  if (r.concurrent_mismatch) {
    print_concurrent_mismatch(std::cout, *runtime, r);
    rc_exit = kExitFailure;
  } else if (r.concurrent_items_checked > 0) {
    std::cout << "  items: made again on " << r.concurrent_threads
              << " threads, every output as made one at a time\n";
  }
  if (r.stats_problem_count > 0) {
    std::cout << "STATISTICS: " << r.stats_problem_count
              << " counts broke the rules of Stats (core/include/encgraph/stats.hpp):\n";
    for (const std::string& p : r.stats_problems) std::cout << "  " << p << "\n";
    rc_exit = kExitFailure;
  } else {
    std::cout << "  statistics: consistent with every call\n";
  }
  return rc_exit;
}

}  // namespace encgraph::host
