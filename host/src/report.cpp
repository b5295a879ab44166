#include "report.hpp"

#include "cli.hpp"

#include <encgraph/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace encgraph::host {
namespace {

double rate(double count, double seconds) {
  return seconds > 0 ? count / seconds : 0.0;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string budgets_text(const std::vector<int64_t>& b) {
  std::string s = "[";
  for (size_t i = 0; i < b.size(); ++i) s += (i ? ", " : "") + std::to_string(b[i]);
  return s + "]";
}

// Where the work ran, for the printed forms: "cpu", or "2 data-parallel ranks
// (cuda:0 (NVIDIA H200), cuda:1 (NVIDIA H200))".
std::string where_text(const ReportInput& in) {
  const auto& ranks = in.data_parallel_devices;
  if (ranks.empty()) return in.device_name;
  std::string s = std::to_string(ranks.size()) + " data-parallel ranks (";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + ranks[i];
  return s + ")";
}

}  // namespace

void describe_runtime(const Model& model, ReportInput& input) {
  input.plugin = model.plugin_name();
  input.device_type = device_type_name(model.device_type());
  input.device_name = model.device_name();
  input.plan = model.plan();
  const eg_model_info& info = model.model_info();
  input.out_hidden_size = info.out_hidden_size;
  input.out_dtype = info.out_dtype;
  input.outputs = model.outputs();
  input.paths.clear();
  for (int p = 0; p < info.num_paths; ++p) {
    PathPlan path;
    path.name = info.paths[p].name ? info.paths[p].name : "";
    path.unit = info.path_units[p] ? info.path_units[p] : "tokens";
    if (static_cast<size_t>(p) < input.plan.path_budgets.size())
      path.budgets = input.plan.path_budgets[p];
    input.paths.push_back(std::move(path));
  }
}

void describe_engine(Engine& engine, ReportInput& input) {
  describe_runtime(engine.model(), input);
  input.data_parallel_devices.clear();
  if (engine.world_size() > 1) input.data_parallel_devices = rank_device_names(engine);
}

std::string eager_reason_key(EagerReason reason) {
  std::string key = eager_reason_name(reason);
  std::replace(key.begin(), key.end(), ' ', '_');
  return key;
}

namespace {

nlohmann::json path_json(const PathStats& p) {
  nlohmann::json reasons = nlohmann::json::object();
  for (int r = 0; r < kNumEagerReasons; ++r)
    reasons[eager_reason_key(static_cast<EagerReason>(r))] = p.eager_by_reason[r];
  return {{"name", p.name},
          {"unit", p.unit},
          {"graphs", p.graphs},
          {"batches_graph", p.batches_graph},
          {"batches_eager", p.batches_eager},
          {"eager_reasons", reasons},
          {"real_tokens", p.real_tokens},
          {"budget_tokens", p.budget_tokens}};
}

// The split of capture_s (seconds; they sum to it).
nlohmann::json capture_phases_json(const CapturePhases& c) {
  return {{"prepare_device", c.prepare_device}, {"warmup", c.warmup},       {"capture", c.capture},
          {"instantiate", c.instantiate},       {"calibrate", c.calibrate}, {"other", c.other}};
}

// "too large 2, chosen as faster 1" (the nonzero reasons), or "" when none.
std::string reasons_text(const nlohmann::json& reasons) {
  std::string s;
  for (const auto& [key, count] : reasons.items()) {
    if (count.get<int64_t>() == 0) continue;
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', ' ');
    s += (s.empty() ? "" : ", ") + name + " " + std::to_string(count.get<int64_t>());
  }
  return s;
}

}  // namespace

nlohmann::json mode_json(const ModeResult& mode) {
  const Measurement& m = mode.measurement;
  const Stats& s = m.stats;
  std::vector<double> ms;
  for (double l : m.latencies) ms.push_back(l * 1e3);
  double max_ms = 0;
  for (double v : ms) max_ms = std::max(max_ms, v);
  nlohmann::json paths = nlohmann::json::array();
  for (const PathStats& p : s.paths) paths.push_back(path_json(p));
  return {
      {"mode", mode.mode},
      {"use_graphs", mode.use_graphs},
      {"items", m.items},
      {"videos", m.videos},
      {"tokens", m.tokens},
      {"requests", m.requests},
      {"seconds", m.exec_seconds},
      {"wall_seconds", m.wall_seconds},
      {"items_per_s", rate(static_cast<double>(m.items), m.exec_seconds)},
      {"tokens_per_s", rate(static_cast<double>(m.tokens), m.exec_seconds)},
      {"latency_ms",
       {{"p50", percentile(ms, 50)},
        {"p99", percentile(ms, 99)},
        {"mean", mean(ms)},
        {"max", max_ms}}},
      {"hit_rate", s.hit_rate},
      {"padded_token_efficiency", s.padded_token_efficiency},
      {"graph_hits", s.graph_hits},
      {"graph_misses", s.graph_misses},
      {"batches_graph", s.batches_graph},
      {"batches_eager", s.batches_eager},
      {"batches_mixed", s.batches_mixed},
      {"batches_eager_chosen", s.batches_eager_chosen},
      {"graphs", s.num_graphs},
      {"capture_s", s.capture_seconds},
      {"capture_phases_s", capture_phases_json(s.capture_phases)},
      {"graph_memory_bytes", s.graph_memory_bytes},
      {"paths", paths},
  };
}

nlohmann::json video_items_json(const std::vector<WorkItem>& work) {
  nlohmann::json videos = nlohmann::json::array();
  for (const WorkItem& w : work)
    if (!w.video_file.empty())
      videos.push_back({{"id", w.id},
                        {"file", w.video_file},
                        {"total_frames", w.video_total_frames},
                        {"fps", w.video_fps},
                        {"height", w.height},
                        {"width", w.width},
                        {"sampling", w.sampling},
                        {"frame_indices", w.frame_indices}});
  return videos;
}

nlohmann::json make_report(const ReportInput& in) {
  const HostConfig& c = *in.config;
  nlohmann::json modes = nlohmann::json::array();
  for (const auto& m : in.modes) modes.push_back(mode_json(m));
  nlohmann::json outputs = nlohmann::json::array();
  for (const OutputSpec& o : in.outputs)
    outputs.push_back({{"name", o.name},
                       {"width", o.width},
                       {"dtype", dtype_name(o.dtype)},
                       {"rows_per_item", o.rows_per_item}});
  nlohmann::json paths = nlohmann::json::array();
  for (const PathPlan& p : in.paths)
    paths.push_back({{"name", p.name}, {"unit", p.unit}, {"token_budgets", p.budgets}});
  nlohmann::json report = {
      {"schema", kReportSchema},
      {"command", in.command},
      {"encgraph_version", version_string()},
      {"config", {{"file", c.source}, {"digest", c.digest}}},
      {"plugin",
       {{"name", in.plugin},
        {"out_hidden_size", in.out_hidden_size},
        {"out_dtype", dtype_name(in.out_dtype)},
        {"outputs", outputs}}},
      {"device", {{"type", in.device_type}, {"name", in.device_name}}},
      {"plan",
       {{"token_budgets", in.plan.token_budgets},
        {"max_items_per_batch", in.plan.max_batch_size},
        {"max_frames_per_batch", in.plan.max_frames_per_batch},
        {"paths", paths}}},
      {"workload",
       {{"kind", c.workload.kind},
        {"items", in.workload_items},
        {"request_size", c.workload.request_size},
        {"warmup_requests", c.workload.warmup_requests}}},
      {"results", modes},
  };
  if (in.work) {
    nlohmann::json videos = video_items_json(*in.work);
    if (!videos.empty()) report["workload"]["videos"] = std::move(videos);
  }
  if (!in.data_parallel_devices.empty())
    report["data_parallel"] = {{"world_size", in.data_parallel_devices.size()},
                               {"devices", in.data_parallel_devices}};
  if (in.modes.size() == 2) {
    const auto& g = in.modes[0].measurement;
    const auto& e = in.modes[1].measurement;
    const double gr = rate(static_cast<double>(g.items), g.exec_seconds);
    const double er = rate(static_cast<double>(e.items), e.exec_seconds);
    report["comparison"] = {{"speedup_items_per_s", er > 0 ? gr / er : 0.0}};
    if (in.comparison) {
      // JSON has no infinity: shapes that differ are reported as null.
      const double d = in.comparison->max_abs_diff;
      report["comparison"]["max_abs_diff"] =
          std::isfinite(d) ? nlohmann::json(d) : nlohmann::json(nullptr);
      report["comparison"]["compared_items"] = in.comparison->items;
      report["comparison"]["compared_values"] = in.comparison->values;
    }
  }
  return report;
}

std::string report_text(const nlohmann::json& report) {
  // Strings from the outside (a config's path) may not be UTF-8: replaced,
  // not thrown over, so a finished run always gets its report.
  return report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::unique_ptr<StagedFile> stage_report(const std::filesystem::path& path,
                                         const nlohmann::json& report) {
  auto out = std::make_unique<StagedFile>(path, "report");
  const std::string text = report_text(report);
  out->write(text.data(), text.size());
  return out;
}

void write_report(const std::filesystem::path& path, const nlohmann::json& report) {
  // Staged and renamed like the embeddings: a failed write keeps the old report.
  stage_report(path, report)->commit();
}

void print_summary(std::ostream& out, const ReportInput& in) {
  for (const auto& mode : in.modes) {
    const auto j = mode_json(mode);
    out << "plugin " << in.plugin << " on " << where_text(in) << ", config " << in.config->source
        << " digest " << in.config->digest << "\n";
    out << "budgets " << budgets_text(in.plan.token_budgets) << ", max_items_per_batch "
        << in.plan.max_batch_size << ", max_frames_per_batch " << in.plan.max_frames_per_batch
        << "\n";
    // A plugin of several paths, or a path with budgets of its own
    // ([budgets.paths.*] or a minimum budget): what each path captures.
    const bool own = std::any_of(in.paths.begin(), in.paths.end(), [&](const PathPlan& p) {
      std::vector<int64_t> b = p.budgets;
      if (!b.empty() && b.front() == 0) b.erase(b.begin());
      return b != in.plan.token_budgets;
    });
    if (in.paths.size() > 1 || own) {
      out << "path budgets";
      for (size_t p = 0; p < in.paths.size(); ++p)
        out << (p ? "; " : ": ") << in.paths[p].name << " " << budgets_text(in.paths[p].budgets)
            << " " << in.paths[p].unit;
      out << "\n";
    }
    out << "items " << j["items"] << " (" << j["videos"] << " videos), tokens " << j["tokens"]
        << ", requests " << j["requests"] << " of " << in.config->workload.request_size << "\n";
    out << "throughput " << fmt("%.1f", j["items_per_s"]) << " items/s, "
        << fmt("%.0f", j["tokens_per_s"]) << " tokens/s\n";
    out << "latency p50 " << fmt("%.3f", j["latency_ms"]["p50"]) << " ms, p99 "
        << fmt("%.3f", j["latency_ms"]["p99"]) << " ms per request\n";
    out << "graphs " << j["graphs"] << ", capture " << fmt("%.3f", j["capture_s"])
        << " s, graph memory " << fmt("%.1f", j["graph_memory_bytes"].get<double>() / (1 << 20))
        << " MiB\n";
    out << "hit rate " << fmt("%.1f", 100.0 * j["hit_rate"].get<double>())
        << "%, padded-token efficiency "
        << fmt("%.1f", 100.0 * j["padded_token_efficiency"].get<double>()) << "%\n";
    out << "batches " << j["batches_graph"] << " graph, " << j["batches_eager"] << " eager, "
        << j["batches_mixed"] << " mixed\n";
    for (const auto& p : j["paths"]) {
      out << "  path " << p["name"].get<std::string>() << " (" << p["unit"].get<std::string>()
          << "): " << p["graphs"] << " graphs, batches " << p["batches_graph"] << " graph, "
          << p["batches_eager"] << " eager";
      const std::string why = reasons_text(p["eager_reasons"]);
      if (!why.empty()) out << " (" << why << ")";
      out << "\n";
    }
    if (in.outputs.size() > 1) {
      out << "outputs";
      for (size_t o = 0; o < in.outputs.size(); ++o)
        out << (o ? ", " : " ") << in.outputs[o].name << " (" << in.outputs[o].width << ", "
            << dtype_name(in.outputs[o].dtype) << ")";
      out << "\n";
    }
  }
}

void print_bench_table(std::ostream& out, const ReportInput& in) {
  out << "bench: plugin " << in.plugin << " on " << where_text(in) << ", " << in.workload_items
      << " items in requests of " << in.config->workload.request_size << ", config digest "
      << in.config->digest << "\n";
  std::vector<nlohmann::json> cols;
  for (const auto& m : in.modes) cols.push_back(mode_json(m));
  auto row = [&](const char* name, auto cell) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%-26s", name);
    out << buf;
    for (const auto& c : cols) {
      std::snprintf(buf, sizeof(buf), "%14s", cell(c).c_str());
      out << buf;
    }
    out << "\n";
  };
  row("", [](const nlohmann::json& c) { return c["mode"].get<std::string>(); });
  row("items/s", [](const nlohmann::json& c) { return fmt("%.1f", c["items_per_s"]); });
  row("tokens/s", [](const nlohmann::json& c) { return fmt("%.0f", c["tokens_per_s"]); });
  row("latency p50 (ms)",
      [](const nlohmann::json& c) { return fmt("%.3f", c["latency_ms"]["p50"]); });
  row("latency p99 (ms)",
      [](const nlohmann::json& c) { return fmt("%.3f", c["latency_ms"]["p99"]); });
  row("hit rate (%)",
      [](const nlohmann::json& c) { return fmt("%.1f", 100.0 * c["hit_rate"].get<double>()); });
  row("padded-token eff. (%)", [](const nlohmann::json& c) {
    return fmt("%.1f", 100.0 * c["padded_token_efficiency"].get<double>());
  });
  row("batches graph/eager", [](const nlohmann::json& c) {
    return std::to_string(c["batches_graph"].get<int64_t>()) + "/" +
           std::to_string(c["batches_eager"].get<int64_t>());
  });
  row("batches mixed",
      [](const nlohmann::json& c) { return std::to_string(c["batches_mixed"].get<int64_t>()); });
  row("batches eager by choice", [](const nlohmann::json& c) {
    return std::to_string(c["batches_eager_chosen"].get<int64_t>());
  });
  // Each path's graph/eager batches (the paths are the plugin's: the same in
  // every mode).
  const size_t num_paths = cols.empty() ? 0 : cols.front()["paths"].size();
  for (size_t p = 0; p < num_paths; ++p) {
    const std::string label = "  path " + cols.front()["paths"][p]["name"].get<std::string>();
    row(label.c_str(), [p](const nlohmann::json& c) {
      const auto& path = c["paths"][p];
      return std::to_string(path["batches_graph"].get<int64_t>()) + "/" +
             std::to_string(path["batches_eager"].get<int64_t>());
    });
  }
  row("graphs", [](const nlohmann::json& c) { return std::to_string(c["graphs"].get<int64_t>()); });
  row("capture (s)", [](const nlohmann::json& c) { return fmt("%.3f", c["capture_s"]); });
  row("graph memory (MiB)", [](const nlohmann::json& c) {
    return fmt("%.1f", c["graph_memory_bytes"].get<double>() / (1 << 20));
  });
  const auto report = make_report(in);
  if (report.contains("comparison")) {
    out << "speedup (items/s, graphs over eager): "
        << fmt("%.2f", report["comparison"]["speedup_items_per_s"]) << "x";
    if (in.comparison)
      out << "; max |graphs - eager| over " << in.comparison->items
          << " items, every output = " << fmt("%.3g", in.comparison->max_abs_diff);
    out << "\n";
  }
}

}  // namespace encgraph::host
