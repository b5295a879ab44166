// `encgraph run`: capture the budget graphs, execute the configured workload in
// requests (on one Runtime, or data parallel over runtime.data_parallel's
// ranks), print a summary (or the JSON report with --json), and write the
// report and embeddings where the config or options say.
#include "cli.hpp"
#include "command_outputs.hpp"
#include "commands.hpp"
#include "embeddings.hpp"
#include "job.hpp"
#include "plugin_dirs.hpp"
#include "report.hpp"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <iostream>

namespace encgraph::host {

int run_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: encgraph run --config FILE [--set KEY=VALUE]... [--report FILE] [--embeddings FILE] "
      "[--json]";
  po::options_description opts("encgraph run options");
  add_config_options(opts);
  opts.add_options()("report", po::value<std::string>()->value_name("FILE"),
                     "write the JSON report here (overrides output.report)")(
      "embeddings", po::value<std::string>()->value_name("FILE"),
      "write the embeddings as safetensors here (overrides output.embeddings)")(
      "json", "print the JSON report on stdout instead of the summary");
  po::variables_map vm;
  if (auto rc = parse_command_line("run", usage, args, opts, nullptr, vm)) return *rc;

  HostConfig config = load_command_config(vm);
  warn_plugin_dirs(config);
  if (vm.count("report")) config.output.report = vm["report"].as<std::string>();
  if (vm.count("embeddings")) config.output.embeddings = vm["embeddings"].as<std::string>();

  // A multi-process job (mpirun): every rank runs this; rank 0 alone checks
  // and writes the outputs.
  join_job(config);
  // Outputs and inputs checked before the model is loaded (command_outputs.hpp).
  on_output_rank("checking outputs", [&] { check_output_targets(config); });
  const std::vector<WorkItem> work = build_workload(config.workload, config.limits);
  require_items(work, config.workload, "run");
  on_output_rank("checking outputs", [&] { check_outputs_against_inputs(config, work); });
  auto engine = make_engine(config.runtime, config.data_parallel, current_job());
  const Model& front = engine->model();
  spdlog::info("running {} items on {} with plugin '{}'", work.size(),
               fmt::join(rank_device_names(*engine), ", "), front.plugin_name());
  check_workload_supported(front, work);
  if (!config.output.embeddings.empty()) check_embedding_names(work, front.outputs());
  if (config.runtime.use_graphs) engine->capture();

  std::unique_ptr<EmbeddingSink> sink;
  if (!config.output.embeddings.empty() && is_output_rank())
    sink = std::make_unique<EmbeddingSink>(config.output.embeddings, front, config);
  ExecOptions options;
  options.request_size = config.workload.request_size;
  options.warmup_requests = config.workload.warmup_requests;
  options.label = "run";
  options.progress = is_output_rank();
  Measurement m =
      execute_workload(*engine, work, options, sink ? sink->consumer() : ResultConsumer{});

  ReportInput input;
  input.command = "run";
  input.config = &config;
  describe_engine(*engine, input);
  input.workload_items = static_cast<int64_t>(work.size());
  input.work = &work;  // a video file's sampled frame indices
  input.modes.push_back(
      {config.runtime.use_graphs ? "graphs" : "eager", config.runtime.use_graphs, std::move(m)});
  const auto report = make_report(input);
  // Rank 0 writes and prints; the others wait for it, so that a failure to
  // write reaches every rank and no rank leaves the job while rank 0 writes.
  on_output_rank("writing the outputs", [&] {
    // Staged before the embeddings replace anything: both outputs or neither.
    std::unique_ptr<StagedFile> staged_report;
    if (!config.output.report.empty()) staged_report = stage_report(config.output.report, report);
    if (sink) {
      const size_t n = sink->finish();
      spdlog::info("wrote {} embeddings ({}) to {}", n, sink->describe(), config.output.embeddings);
    }
    if (staged_report) {
      staged_report->commit();
      spdlog::info("wrote the report to {}", config.output.report);
    }
    if (vm.count("json"))
      std::cout << report_text(report);
    else
      print_summary(std::cout, input);
  });
  return kExitOk;
}

}  // namespace encgraph::host
