// `encgraph bench`: the same workload with graphs and eagerly (a second Runtime
// with use_graphs = false), request by request in turn, then a side-by-side
// table. With runtime.data_parallel both modes are data parallel over the same
// devices (two DataParallelRuntimes). Every request's outputs (every named
// output) of both modes are compared as a correctness check.
#include "cli.hpp"
#include "command_outputs.hpp"
#include "commands.hpp"
#include "job.hpp"
#include "plugin_dirs.hpp"
#include "report.hpp"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <encgraph/error.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>

namespace encgraph::host {
namespace {

// Every output of one request's items, as floats: [item][output].
using RequestOutputs = std::vector<std::vector<std::vector<float>>>;

RequestOutputs outputs_as_float(const Result& result) {
  RequestOutputs out(result.size());
  for (size_t i = 0; i < result.size(); ++i)
    for (size_t o = 0; o < result.num_outputs(); ++o) out[i].push_back(result.item_as_float(i, o));
  return out;
}

// Adds one request's graphs-against-eager differences to `c` (infinity when
// the shapes differ, or a value is NaN or infinite in one mode only).
void compare_request(const RequestOutputs& a, const RequestOutputs& b, OutputComparison& c) {
  if (a.size() != b.size()) {
    c.max_abs_diff = INFINITY;
    return;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    c.items += 1;
    if (a[i].size() != b[i].size()) c.max_abs_diff = INFINITY;
    for (size_t o = 0; o < a[i].size() && o < b[i].size(); ++o) {
      if (a[i][o].size() != b[i][o].size()) c.max_abs_diff = INFINITY;
      for (size_t k = 0; k < a[i][o].size() && k < b[i][o].size(); ++k) {
        const double x = a[i][o][k], y = b[i][o][k];
        c.values += 1;
        if (std::isnan(x) && std::isnan(y)) continue;  // the same in both modes
        const double d = x == y ? 0.0 : std::fabs(x - y);
        c.max_abs_diff = std::max(c.max_abs_diff, std::isnan(d) ? INFINITY : d);
      }
    }
  }
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: encgraph bench --config FILE [--set KEY=VALUE]... [--report FILE] [--json]";
  po::options_description opts("encgraph bench options");
  add_config_options(opts);
  opts.add_options()("report", po::value<std::string>()->value_name("FILE"),
                     "write the JSON report here (overrides output.report)")(
      "json", "print the JSON report on stdout instead of the table");
  po::variables_map vm;
  if (auto rc = parse_command_line("bench", usage, args, opts, nullptr, vm)) return *rc;

  HostConfig config = load_command_config(vm);
  warn_plugin_dirs(config);
  if (vm.count("report")) config.output.report = vm["report"].as<std::string>();
  if (!config.output.embeddings.empty()) {
    spdlog::warn(
        "bench does not write embeddings; output.embeddings is ignored (use run or encode)");
    config.output.embeddings.clear();  // nor is it checked as an output
  }
  join_job(config);  // a multi-process job: rank 0 alone checks and writes outputs
  on_output_rank("checking outputs", [&] { check_output_targets(config); });
  const std::vector<WorkItem> work = build_workload(config.workload, config.limits);
  require_items(work, config.workload, "bench");
  on_output_rank("checking outputs", [&] { check_outputs_against_inputs(config, work); });

  ReportInput input;
  input.command = "bench";
  input.config = &config;
  input.workload_items = static_cast<int64_t>(work.size());
  input.work = &work;  // a video file's sampled frame indices
  ExecOptions options;
  options.request_size = config.workload.request_size;
  options.warmup_requests = config.workload.warmup_requests;
  // Both runtimes live together and take the requests in turn (see
  // execute_interleaved): run one after the other, the second met a GPU that
  // had been busy for longer and ran up to 5% slower on the same batches.
  std::vector<std::unique_ptr<Engine>> engines;
  for (bool graphs : {true, false}) {
    RuntimeConfig rc = config.runtime;
    rc.use_graphs = graphs;
    engines.push_back(make_engine(rc, config.data_parallel, current_job()));
    check_workload_supported(engines.back()->model(), work);
  }
  describe_engine(*engines[0], input);
  engines[0]->capture();
  options.label = "bench graphs + eager";
  options.progress = is_output_rank();
  spdlog::info("{}: {} items on {}", options.label, work.size(),
               fmt::join(rank_device_names(*engines[0]), ", "));
  // Every measured request's outputs of the two modes are compared once both
  // have run it (which goes first alternates); the copies to the host and the
  // comparison count in wall_seconds only.
  OutputComparison comparison;
  std::vector<std::optional<RequestOutputs>> pending(2);
  auto keep = [&](size_t mode) -> ResultConsumer {
    return [&, mode](const std::vector<const WorkItem*>&, const Result& result) {
      pending[mode] = outputs_as_float(result);
      if (!pending[0] || !pending[1]) return;
      compare_request(*pending[0], *pending[1], comparison);
      pending[0].reset();
      pending[1].reset();
    };
  };
  const std::vector<Measurement> measured =
      execute_interleaved({engines[0].get(), engines[1].get()}, work, options, {keep(0), keep(1)});
  input.modes.push_back({"graphs", true, measured[0]});
  input.modes.push_back({"eager", false, measured[1]});
  input.comparison = comparison;

  const auto report = make_report(input);
  // Rank 0 writes and prints; the others wait for it (a failure to write
  // reaches every rank).
  on_output_rank("writing the report", [&] {
    if (!config.output.report.empty()) {
      write_report(config.output.report, report);
      spdlog::info("wrote the report to {}", config.output.report);
    }
    if (vm.count("json"))
      std::cout << report_text(report);
    else
      print_bench_table(std::cout, input);
  });
  return kExitOk;
}

}  // namespace encgraph::host
