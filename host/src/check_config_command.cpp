// `encgraph check-config`: everything that can be checked without a GPU and
// without reading weights. Keys, types and values always; the workload (trace
// lines, image headers); the weights path's existence; and, when the plugin is
// found and the config runs on the CPU ("cpu" or "auto", or CPU data-parallel
// ranks), the budget plan as the plugin would make it (an instance created on
// the CPU with random weights, which ABI v1 needs to answer budget_range and
// model_info; --structural skips that).
#include "cli.hpp"
#include "commands.hpp"
#include "config_schema.hpp"
#include "executor.hpp"
#include "plugin_dirs.hpp"
#include "workload.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace encgraph::host {
namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The plan, and each path's own list when they can differ (several paths, or
// [budgets.paths.<name>] set).
void print_plan(const Model& model, const BudgetRequest& request) {
  const BudgetPlan& plan = model.plan();
  std::cout << "  plan: token_budgets " << list(plan.token_budgets) << ", max_items_per_batch "
            << plan.max_batch_size << ", max_frames_per_batch " << plan.max_frames_per_batch
            << "\n";
  if (plan.path_budgets.size() < 2 && request.paths.empty()) return;
  const eg_model_info& info = model.model_info();
  std::cout << "  path budgets:";
  for (size_t p = 0; p < plan.path_budgets.size(); ++p) {
    const bool named = static_cast<int32_t>(p) < info.num_paths && info.paths[p].name;
    const std::string name = named ? info.paths[p].name : "path" + std::to_string(p);
    std::cout << (p ? "; " : " ") << name << " " << list(plan.path_budgets[p])
              << (request.paths.count(name) ? " (budgets.paths." + name + ")" : "");
  }
  std::cout << "\n";
}

}  // namespace

int check_config_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: encgraph check-config FILE [--set KEY=VALUE]... [--structural]\n"
      "       encgraph check-config --list-keys";
  // The schema needs no config file: docs and tests compare their key tables with it.
  if (std::find(args.begin(), args.end(), "--list-keys") != args.end()) {
    for (const KeySpec& key : config_schema())
      std::cout << key.path << "\t" << type_phrase(key.type) << "\t" << key.default_value << "\n";
    return kExitOk;
  }
  po::options_description opts("encgraph check-config options");
  add_config_options(opts);
  opts.add_options()("structural",
                     "do not create a plugin instance: keys, types, workload and "
                     "explicit budgets only");
  opts.add_options()("list-keys",
                     "print every config key the host reads (key, type, default; one a line, "
                     "tab-separated) and exit; needs no FILE");
  po::positional_options_description positional;
  positional.add("config", 1);
  po::variables_map vm;
  if (auto rc = parse_command_line("check-config", usage, args, opts, &positional, vm)) return *rc;

  const HostConfig config = load_command_config(vm);
  const RuntimeConfig& rt = config.runtime;
  require_plugin_dirs(config);
  std::cout << config.source << ": keys and values ok (digest " << config.digest << ")\n";

  const std::vector<WorkItem> work = build_workload(config.workload, config.limits);
  std::cout << "  workload: " << config.workload.kind << ", " << work.size() << " items\n";
  // With data parallelism the ranks' devices replace runtime.device.
  const std::string& device = execution_device(config);
  const std::string device_key =
      config.data_parallel.empty() ? "runtime.device" : "runtime.data_parallel";
  if (!config.data_parallel.empty()) {
    std::cout << "  data parallel: " << config.data_parallel.size() << " ranks (";
    for (size_t i = 0; i < config.data_parallel.size(); ++i)
      std::cout << (i ? ", " : "") << config.data_parallel[i];
    std::cout << ")\n";
  }

  // A checkpoint file or folder; anything else (a FIFO, a device) would block or
  // never end when the plugin reads it.
  if (!rt.weights.empty() && rt.weights != "random" && rt.weights != "none") {
    std::error_code ec;
    const auto status = std::filesystem::status(rt.weights, ec);
    if (!std::filesystem::exists(status))
      throw_config(config.source + ": plugin.weights: '" + rt.weights + "' does not exist");
    if (!std::filesystem::is_regular_file(status) && !std::filesystem::is_directory(status))
      throw_config(config.source + ": plugin.weights: '" + rt.weights +
                   "' is neither a file nor a folder (a FIFO or a device?): name a .safetensors "
                   "file, its index.json or the checkpoint folder");
  }

  // Only the file plugin.name maps to is opened; a config may name a plugin that is
  // not built yet (checked structurally below), but a file that is there and broken
  // is an error.
  const PluginRegistry registry(rt.plugin_dirs);
  const LoadedPlugin* plugin = registry.find(rt.plugin) ? &registry.get(rt.plugin) : nullptr;
  const bool cuda = device.rfind("cuda", 0) == 0;
  // In a build without CUDA no plugin has a CUDA path, so a CUDA config can only be
  // checked structurally here; in a CUDA build a plugin without one cannot run it.
#ifdef ENCGRAPH_HAVE_CUDA
  constexpr bool kBuildHasCuda = true;
#else
  constexpr bool kBuildHasCuda = false;
#endif
  if (plugin) {
    std::cout << "  plugin: " << plugin->name << " " << plugin->version << " ("
              << plugin->file.string() << "), devices " << device_names(plugin->api->devices)
              << "\n";
    if (cuda && kBuildHasCuda && !(plugin->api->devices & EG_DEVICE_CUDA))
      throw_config(config.source + ": " + device_key + ": plugin '" + rt.plugin +
                   "' does not run on CUDA (it supports " + device_names(plugin->api->devices) +
                   ")");
    if (device == "cpu" && !(plugin->api->devices & EG_DEVICE_CPU))
      throw_config(config.source + ": " + device_key + ": plugin '" + rt.plugin +
                   "' does not run on the CPU (it supports " + device_names(plugin->api->devices) +
                   ")");
  }

  // The plugin is asked only for configs that run on the CPU: a CUDA config's
  // plugin table may be valid for CUDA alone (e.g. a bf16 dtype), and its
  // full-size model is no quick CPU instance.
  const char* structural_reason =
      vm.count("structural") ? "as asked (--structural)"
      : !plugin              ? "the plugin is not on the search path yet"
      : cuda && !kBuildHasCuda
          ? "a CUDA config: no GPU is used here, and this encgraph was built without CUDA "
            "(-DENCGRAPH_WITH_CUDA=OFF), so it cannot run this config; a build with CUDA can"
      : cuda                                    ? "a CUDA config: no GPU is used here"
      : !(plugin->api->devices & EG_DEVICE_CPU) ? "the plugin has no CPU instance to ask"
                                                : nullptr;
  if (structural_reason) {
    // A config may be written before its plugin is built: not an error here.
    std::cout << "  budgets checked structurally only: " << structural_reason << "\n";
    if (!rt.budgets.token_budgets.empty()) {
      // Checked when the config was read (check_budget_request); what the
      // plugin's range would infer is not shown.
      std::vector<int64_t> budgets = rt.budgets.token_budgets;
      std::sort(budgets.begin(), budgets.end());
      budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
      std::cout << "  plan: token_budgets " << list(budgets) << ", max_items_per_batch ";
      if (rt.budgets.max_items_per_batch > 0)
        std::cout << rt.budgets.max_items_per_batch;
      else
        std::cout << "(the plugin's range infers it)";
      // Frames per video are the plugin's to say: shown only when set explicitly.
      if (!rt.budgets.video_enabled)
        std::cout << ", max_frames_per_batch 0";
      else if (rt.budgets.max_frames_per_batch)
        std::cout << ", max_frames_per_batch " << *rt.budgets.max_frames_per_batch;
      std::cout << "\n";
    }
    // Whether the plugin has these paths is checked when it is asked.
    for (const auto& [name, own] : rt.budgets.paths) {
      std::cout << "  budgets.paths." << name << ": ";
      if (own.token_budgets.empty()) {
        std::cout << "token_step " << own.token_step << "\n";
      } else {
        std::vector<int64_t> budgets = own.token_budgets;
        std::sort(budgets.begin(), budgets.end());
        budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
        std::cout << "token_budgets " << list(budgets) << "\n";
      }
    }
    std::cout << "ok\n";
    return kExitOk;
  }
  RuntimeConfig probe = rt;
  probe.device = "cpu";
  probe.weights = "random";
  // A checkpoint folder's sizes come from its config.json: the probe draws
  // random weights of those sizes instead of loading the folder's tensors.
  std::error_code ec;
  const std::filesystem::path folder_config = std::filesystem::path(rt.weights) / "config.json";
  const bool names_config = std::any_of(probe.plugin_config.begin(), probe.plugin_config.end(),
                                        [](const auto& kv) { return kv.first == "config_json"; });
  if (!rt.weights.empty() && rt.weights != "random" &&
      std::filesystem::is_directory(rt.weights, ec) &&
      std::filesystem::is_regular_file(folder_config, ec) && !names_config)
    probe.plugin_config.emplace_back("config_json", folder_config.string());
  auto runtime = make_runtime(probe);
  check_workload_supported(*runtime, work);
  print_plan(*runtime, rt.budgets);
  std::cout << "ok\n";
  return kExitOk;
}

}  // namespace encgraph::host
