#include "describe.hpp"

#include "tensor.hpp"

#include <encgraph/plugin_loader.hpp>

namespace py = pybind11;

namespace encgraph::python {
namespace {

py::list int_list(const std::vector<int64_t>& values) {
  py::list out;
  for (int64_t v : values) out.append(v);
  return out;
}

// "image,video" -> ["image", "video"]
py::list split_names(const std::string& names) {
  py::list out;
  size_t start = 0;
  while (start < names.size()) {
    const size_t comma = names.find(',', start);
    const size_t end = comma == std::string::npos ? names.size() : comma;
    if (end > start) out.append(names.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

py::dict describe_stats(const Stats& s) {
  py::dict d;
  d["graph_hits"] = s.graph_hits;
  d["graph_misses"] = s.graph_misses;
  d["hit_rate"] = s.hit_rate;
  d["num_graphs"] = s.num_graphs;
  d["token_budgets"] = int_list(s.token_budgets);
  d["real_tokens"] = s.real_tokens;
  d["budget_tokens"] = s.budget_tokens;
  d["padded_token_efficiency"] = s.padded_token_efficiency;
  d["batches_graph"] = s.batches_graph;
  d["batches_eager"] = s.batches_eager;
  d["batches_mixed"] = s.batches_mixed;
  d["batches_eager_chosen"] = s.batches_eager_chosen;
  d["capture_seconds"] = s.capture_seconds;
  py::dict phases;  // the report's capture_phases_s
  phases["prepare_device"] = s.capture_phases.prepare_device;
  phases["warmup"] = s.capture_phases.warmup;
  phases["capture"] = s.capture_phases.capture;
  phases["instantiate"] = s.capture_phases.instantiate;
  phases["calibrate"] = s.capture_phases.calibrate;
  phases["other"] = s.capture_phases.other;
  d["capture_phases"] = phases;
  d["graph_memory_bytes"] = s.graph_memory_bytes;
  py::list paths;
  for (const PathStats& p : s.paths) {
    py::dict pd;
    pd["name"] = p.name;
    pd["unit"] = p.unit;
    pd["graphs"] = p.graphs;
    pd["batches_graph"] = p.batches_graph;
    pd["batches_eager"] = p.batches_eager;
    py::dict reasons;
    for (int r = 0; r < kNumEagerReasons; ++r)
      reasons[eager_reason_name(static_cast<EagerReason>(r))] = p.eager_by_reason[r];
    pd["eager_by_reason"] = reasons;
    pd["real_tokens"] = p.real_tokens;
    pd["budget_tokens"] = p.budget_tokens;
    paths.append(pd);
  }
  d["paths"] = paths;
  return d;
}

py::dict describe_plan(const Model& model) {
  const BudgetPlan& plan = model.plan();
  const eg_model_info& info = model.model_info();
  py::dict d;
  d["token_budgets"] = int_list(plan.token_budgets);
  d["max_batch_size"] = plan.max_batch_size;
  d["max_frames_per_batch"] = plan.max_frames_per_batch;
  py::dict paths;
  for (size_t p = 0; p < plan.path_budgets.size(); ++p) {
    const bool named = static_cast<int32_t>(p) < info.num_paths && info.paths[p].name;
    paths[py::str(named ? info.paths[p].name : "path " + std::to_string(p))] =
        int_list(plan.path_budgets[p]);
  }
  d["path_budgets"] = paths;
  return d;
}

py::dict describe_model(const Model& model) {
  const eg_model_info& info = model.model_info();
  py::dict d;
  d["plugin"] = model.plugin_name();
  d["plugin_version"] = model.plugin_version();
  d["device"] = model.device_name();
  d["out_hidden_size"] = info.out_hidden_size;
  d["out_dtype"] = dtype_name(info.out_dtype);
  d["max_frames_per_video"] = info.max_frames_per_video;
  py::list modalities;
  if (model.supports_modality(EG_MODALITY_IMAGE)) modalities.append("image");
  if (model.supports_modality(EG_MODALITY_VIDEO)) modalities.append("video");
  d["modalities"] = modalities;
  py::list outputs;
  for (const OutputSpec& o : model.outputs()) {
    py::dict od;
    od["name"] = o.name;
    od["width"] = o.width;
    od["dtype"] = dtype_name(o.dtype);
    od["rows_per_item"] = o.rows_per_item;
    outputs.append(od);
  }
  d["outputs"] = outputs;
  py::list paths;
  for (int32_t p = 0; p < info.num_paths; ++p) {
    py::dict pd;
    pd["name"] = info.paths[p].name ? info.paths[p].name : "";
    pd["unit"] = info.path_units[p] ? info.path_units[p] : "tokens";
    pd["min_token_budget"] = info.paths[p].min_token_budget;
    pd["allow_zero_tokens"] = info.paths[p].allow_zero_tokens != 0;
    paths.append(pd);
  }
  d["paths"] = paths;
  py::list axes;
  for (int32_t a = 0; a < info.num_capture_axes; ++a) {
    py::dict ad;
    ad["name"] = info.capture_axes[a].name ? info.capture_axes[a].name : "";
    ad["keys"] = int_list(std::vector<int64_t>(
        info.capture_axes[a].keys, info.capture_axes[a].keys + info.capture_axes[a].num_keys));
    axes.append(ad);
  }
  d["capture_axes"] = axes;
  return d;
}

py::list describe_plugins(const std::vector<std::filesystem::path>& dirs, bool include_rejected) {
  PluginSurvey survey;
  {
    py::gil_scoped_release release;  // probes run in child processes
    survey = PluginRegistry(dirs).survey();
  }
  py::list out;
  for (const PluginInfo& p : survey.plugins) {
    py::dict d;
    d["name"] = p.name;
    d["version"] = p.version;
    d["description"] = p.description;
    d["file"] = p.file.string();
    d["abi"] = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
    d["modalities"] = split_names(modality_names(p.modalities));
    d["devices"] = split_names(device_names(p.devices));
    d["valid"] = true;
    out.append(d);
  }
  if (include_rejected)
    for (const RejectedPlugin& r : survey.rejected) {
      py::dict d;
      d["file"] = r.file.string();
      d["reason"] = r.reason;
      d["valid"] = false;
      out.append(d);
    }
  return out;
}

}  // namespace encgraph::python
