// `encgraph bench`: the same workload with graphs and eagerly (a second Runtime
// with use_graphs = false), request by request in turn, then a side-by-side
// table. With runtime.data_parallel both modes are data parallel over the same
// devices (two DataParallelRuntimes). The first request's outputs of both modes
// are compared as a correctness check.
#include "cli.hpp"
#include "command_outputs.hpp"
#include "commands.hpp"
#include "report.hpp"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <encgraph/error.hpp>

#include <cmath>
#include <iostream>

namespace encgraph::host {
namespace {

// Every item's output, as floats, of the workload's first request (unmeasured).
std::vector<std::vector<float>> first_request(Engine& engine, const std::vector<WorkItem>& work,
                                              int64_t request_size) {
  std::vector<const WorkItem*> items;
  for (size_t i = 0; i < work.size() && static_cast<int64_t>(i) < request_size; ++i)
    items.push_back(&work[i]);
  const Result result = engine.execute(engine.prepare(items));
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < result.size(); ++i) out.push_back(result.item_as_float(i));
  return out;
}

double max_abs_diff(const std::vector<std::vector<float>>& a,
                    const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return INFINITY;
    for (size_t k = 0; k < a[i].size(); ++k)
      worst = std::max(worst, std::fabs(static_cast<double>(a[i][k]) - b[i][k]));
  }
  return worst;
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
  if (vm.count("report")) config.output.report = vm["report"].as<std::string>();
  if (!config.output.embeddings.empty()) {
    spdlog::warn(
        "bench does not write embeddings; output.embeddings is ignored (use run or encode)");
    config.output.embeddings.clear();  // nor is it checked as an output
  }
  check_output_targets(config);
  const std::vector<WorkItem> work = build_workload(config.workload, config.limits);
  require_items(work, config.workload, "bench");
  check_outputs_against_inputs(config, work);

  ReportInput input;
  input.command = "bench";
  input.config = &config;
  input.workload_items = static_cast<int64_t>(work.size());
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
    engines.push_back(make_engine(rc, config.data_parallel));
    check_workload_supported(engines.back()->front(), work);
  }
  describe_engine(*engines[0], input);
  engines[0]->capture();
  options.label = "bench graphs + eager";
  spdlog::info("{}: {} items on {}", options.label, work.size(),
               fmt::join(engines[0]->device_names(), ", "));
  const std::vector<Measurement> measured =
      execute_interleaved({engines[0].get(), engines[1].get()}, work, options);
  input.modes.push_back({"graphs", true, measured[0]});
  input.modes.push_back({"eager", false, measured[1]});
  input.max_abs_diff = max_abs_diff(first_request(*engines[0], work, options.request_size),
                                    first_request(*engines[1], work, options.request_size));

  const auto report = make_report(input);
  if (!config.output.report.empty()) {
    write_report(config.output.report, report);
    spdlog::info("wrote the report to {}", config.output.report);
  }
  if (vm.count("json"))
    std::cout << report_text(report);
  else
    print_bench_table(std::cout, input);
  return kExitOk;
}

}  // namespace encgraph::host
