// `encgraph encode`: decode image files (PNG, JPEG) and video files (MP4, MKV,
// WebM: the frames the model family's processor samples), hand their pixels
// to the plugin's preprocessing, run them, and write one safetensors tensor
// per file, named by the file's path. `--trace` encodes a JSONL trace instead
// (images, and videos given as video files or frame files: one tensor per
// video, named by its id).
// Without either the config's workload is encoded.
#include "cli.hpp"
#include "command_outputs.hpp"
#include "commands.hpp"
#include "embeddings.hpp"
#include "job.hpp"
#include "plugin_dirs.hpp"
#include "report.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>

namespace encgraph::host {
int encode_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: encgraph encode --config FILE [--set KEY=VALUE]... [-o FILE] [--report FILE] "
      "[--trace FILE | FILE...]";
  po::options_description opts("encgraph encode options");
  add_config_options(opts);
  opts.add_options()("output,o", po::value<std::string>()->value_name("FILE"),
                     "the safetensors file to write (overrides output.embeddings; one of them is "
                     "required)")("report", po::value<std::string>()->value_name("FILE"),
                                  "write the JSON report here (overrides output.report)")(
      "trace", po::value<std::string>()->value_name("FILE"),
      "a JSONL trace to encode (images, video files and videos of frame files; sets "
      "workload.kind = \"trace\")")("files", po::value<std::vector<std::string>>()->composing(),
                                    "image or video files, or glob patterns (also given without "
                                    "--files)");
  po::positional_options_description positional;
  positional.add("files", -1);
  po::variables_map vm;
  if (auto rc = parse_command_line("encode", usage, args, opts, &positional, vm)) return *rc;

  if (vm.count("trace") && vm.count("files"))
    throw_config(
        "encode takes image files or --trace FILE, not both (list the images and videos in "
        "the trace as {\"file\": ...} and {\"video\": ...} lines)");
  // Encoding files once is the point, so no warm-up unless the user asks (their
  // --set comes later and wins).
  ConfigUse use;
  use.workload_replaced = vm.count("files") || vm.count("trace");
  HostConfig config = load_command_config(vm, {"workload.warmup_requests=0"}, use);
  warn_plugin_dirs(config);
  // The files and the trace replace the config's workload as values, never as
  // TOML text: any byte a file name may hold stays part of the name.
  if (vm.count("files")) {
    config.workload.kind = "files";
    config.workload.files = vm["files"].as<std::vector<std::string>>();
  } else if (vm.count("trace")) {
    config.workload.kind = "trace";
    config.workload.trace = vm["trace"].as<std::string>();
  }
  config.digest = config_digest(config);
  if (vm.count("output")) config.output.embeddings = vm["output"].as<std::string>();
  if (vm.count("report")) config.output.report = vm["report"].as<std::string>();
  if (config.output.embeddings.empty())
    throw_config("encode needs somewhere to write: give -o FILE or set output.embeddings");

  // Every check on the outputs and the inputs before the model is loaded, so
  // that a bad path costs seconds, not a run.
  join_job(config);  // a multi-process job: rank 0 alone checks and writes outputs
  on_output_rank("checking outputs", [&] { check_output_targets(config); });
  const std::vector<WorkItem> work = build_workload(config.workload, config.limits);
  require_items(work, config.workload, "encode");
  on_output_rank("checking outputs", [&] { check_outputs_against_inputs(config, work); });
  auto engine = make_engine(config.runtime, config.data_parallel, current_job());
  const Model& front = engine->model();
  check_workload_supported(front, work);
  check_embedding_names(work, front.outputs());
  if (config.runtime.use_graphs) engine->capture();
  std::unique_ptr<EmbeddingSink> sink;
  if (is_output_rank())
    sink = std::make_unique<EmbeddingSink>(config.output.embeddings, front, config);
  ExecOptions options;
  options.request_size = config.workload.request_size;
  options.warmup_requests = config.workload.warmup_requests;
  options.label = "encode";
  options.progress = is_output_rank();
  Measurement m =
      execute_workload(*engine, work, options, sink ? sink->consumer() : ResultConsumer{});
  // Rank 0 writes; the others wait for it, so that a failure to write
  // reaches every rank and no rank leaves the job while rank 0 writes.
  on_output_rank("writing the outputs", [&] {
    // The report is staged first: a report that cannot be written leaves the
    // old embeddings in place too.
    std::unique_ptr<StagedFile> report;
    if (!config.output.report.empty()) {
      ReportInput input;
      input.command = "encode";
      input.config = &config;
      describe_engine(*engine, input);
      input.workload_items = static_cast<int64_t>(work.size());
      input.work = &work;
      input.modes.push_back({config.runtime.use_graphs ? "graphs" : "eager",
                             config.runtime.use_graphs, std::move(m)});
      report = stage_report(config.output.report, make_report(input));
    }
    const size_t n = sink->finish();
    std::cout << "wrote " << n << " embeddings (" << sink->describe() << ") to "
              << config.output.embeddings << "\n";
    if (report) {
      report->commit();
      spdlog::info("wrote the report to {}", config.output.report);
    }
  });
  return kExitOk;
}

}  // namespace encgraph::host
