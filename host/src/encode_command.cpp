// `encgraph encode`: decode image files (PNG, JPEG), hand their pixels to the
// plugin's preprocessing, run them, and write one safetensors tensor per file,
// named by the file's path. `--trace` encodes a JSONL trace instead (images,
// and videos given as frame files: one tensor per video, named by its id).
// Without either the config's workload is encoded.
#include "cli.hpp"
#include "commands.hpp"
#include "embeddings.hpp"
#include "report.hpp"
#include "toml_util.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <iostream>

namespace encgraph::host {

int encode_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: encgraph encode --config FILE [--set KEY=VALUE]... [-o FILE] [--report FILE] "
      "[--trace FILE | IMAGE...]";
  po::options_description opts("encgraph encode options");
  add_config_options(opts);
  opts.add_options()("output,o", po::value<std::string>()->value_name("FILE"),
                     "the safetensors file to write (overrides output.embeddings; one of them is "
                     "required)")("report", po::value<std::string>()->value_name("FILE"),
                                  "write the JSON report here (overrides output.report)")(
      "trace", po::value<std::string>()->value_name("FILE"),
      "a JSONL trace to encode (images and videos of frame files; sets workload.kind = "
      "\"trace\")")("files", po::value<std::vector<std::string>>()->composing(),
                    "image files or glob patterns (also given without --files)");
  po::positional_options_description positional;
  positional.add("files", -1);
  po::variables_map vm;
  if (auto rc = parse_command_line("encode", usage, args, opts, &positional, vm)) return *rc;

  // Files named here replace the config's workload; encoding files once is the
  // point, so no warm-up unless the user asks (their --set comes later and wins).
  std::vector<std::string> overrides = {"workload.warmup_requests=0"};
  if (vm.count("files")) {
    std::string list = "[";
    for (const auto& f : vm["files"].as<std::vector<std::string>>())
      list += (list.size() > 1 ? ", " : "") + toml_quote(f);
    overrides.push_back("workload.kind=\"files\"");
    overrides.push_back("workload.files=" + list + "]");
  }
  if (vm.count("trace")) {
    if (vm.count("files"))
      throw_config(
          "encode takes image files or --trace FILE, not both (list the images in the "
          "trace as {\"file\": ...} lines)");
    overrides.push_back("workload.kind=\"trace\"");
    overrides.push_back("workload.trace=" + toml_quote(vm["trace"].as<std::string>()));
  }
  HostConfig config = load_command_config(vm, overrides);
  if (vm.count("output")) config.output.embeddings = vm["output"].as<std::string>();
  if (vm.count("report")) config.output.report = vm["report"].as<std::string>();
  if (config.output.embeddings.empty())
    throw_config("encode needs somewhere to write: give -o FILE or set output.embeddings");

  const std::vector<WorkItem> work = build_workload(config.workload);
  auto engine = make_engine(config.runtime, config.data_parallel);
  const Runtime& front = engine->front();
  check_workload_supported(front, work);
  if (config.runtime.use_graphs) engine->capture();
  EmbeddingSink sink(config.output.embeddings, front, config);
  ExecOptions options;
  options.request_size = config.workload.request_size;
  options.warmup_requests = config.workload.warmup_requests;
  options.label = "encode";
  Measurement m = execute_workload(*engine, work, options, sink.consumer());
  const size_t n = sink.finish();
  std::cout << "wrote " << n << " embeddings (" << sink.rows() << " rows of "
            << front.model_info().out_hidden_size << ", "
            << dtype_name(front.model_info().out_dtype) << ") to " << config.output.embeddings
            << "\n";

  if (!config.output.report.empty()) {
    ReportInput input;
    input.command = "encode";
    input.config = &config;
    describe_engine(*engine, input);
    input.workload_items = static_cast<int64_t>(work.size());
    input.modes.push_back(
        {config.runtime.use_graphs ? "graphs" : "eager", config.runtime.use_graphs, std::move(m)});
    write_report(config.output.report, make_report(input));
    spdlog::info("wrote the report to {}", config.output.report);
  }
  return kExitOk;
}

}  // namespace encgraph::host
