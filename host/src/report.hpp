// The run report: one JSON document (schema "encgraph.report/1") with what ran
// (the plugin and its named outputs), where (with data parallelism: on which
// ranks), under which plan (each path's budgets and unit), and per mode (graphs,
// eager) the throughput, latency percentiles and graph statistics, per path
// too (graph and eager batches, the reasons for eager ones); plus the
// human-readable forms printed on stdout (a summary for run, a side-by-side
// table for bench).
#pragma once

#include "config.hpp"
#include "executor.hpp"
#include "output_files.hpp"

#include <encgraph/engine.hpp>
#include <encgraph/output_spec.hpp>
#include <encgraph/runtime.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace encgraph::host {

inline constexpr const char* kReportSchema = "encgraph.report/1";

struct ModeResult {
  std::string mode;  // "graphs" or "eager"
  bool use_graphs = true;
  Measurement measurement;
};

// One path of the plugin as the plan has it.
struct PathPlan {
  std::string name;
  std::string unit;              // what its budgets count
  std::vector<int64_t> budgets;  // ascending, may start with 0
};

// Bench: the two modes' outputs compared over every request.
struct OutputComparison {
  double max_abs_diff = 0.0;  // over every item's every output (inf: shapes differ)
  int64_t items = 0;          // items compared
  int64_t values = 0;         // values compared
};

struct ReportInput {
  std::string command;
  const HostConfig* config = nullptr;
  std::string plugin;
  std::string device_type;  // "cpu" or "cuda"
  std::string device_name;  // data parallel: rank 0's, where results land
  // Data parallel: each rank's device name (the world size is its length);
  // empty when one Runtime ran.
  std::vector<std::string> data_parallel_devices;
  BudgetPlan plan;
  std::vector<PathPlan> paths;
  int64_t out_hidden_size = 0;
  int32_t out_dtype = 0;
  std::vector<OutputSpec> outputs;
  int64_t workload_items = 0;
  std::vector<ModeResult> modes;
  std::optional<OutputComparison> comparison;  // bench: graphs vs eager, every request
  // The workload, when the command has one: its video files are listed in the
  // report's workload.videos (file, frame count and rate, sampled indices).
  const std::vector<WorkItem>* work = nullptr;
};

// One entry per video-file item: {"id", "file", "total_frames", "fps",
// "sampling", "frame_indices"}; an empty array when there is none.
nlohmann::json video_items_json(const std::vector<WorkItem>& work);

// Facts of a runtime (plugin, device, plan, output) copied into `input`.
void describe_runtime(const Model& model, ReportInput& input);
// The same for an engine: its first runtime's facts, and its ranks' devices
// when data parallel.
void describe_engine(Engine& engine, ReportInput& input);

// "too_large" for EagerReason::TooLarge: eager_reason_name with underscores,
// the key of the report's eager_reasons.
std::string eager_reason_key(EagerReason reason);

// The report as JSON text (indented, newline-terminated); a string that is
// not UTF-8 is written with replacement characters instead of failing.
std::string report_text(const nlohmann::json& report);

nlohmann::json make_report(const ReportInput& input);
nlohmann::json mode_json(const ModeResult& mode);
// The report written under a staging name in the target's folder, ready to
// commit() (output_files.hpp): a command stages it before replacing the
// embeddings, so that neither output is replaced when the other cannot be.
std::unique_ptr<StagedFile> stage_report(const std::filesystem::path& path,
                                         const nlohmann::json& report);
// stage_report and commit.
void write_report(const std::filesystem::path& path, const nlohmann::json& report);

void print_summary(std::ostream& out, const ReportInput& input);
void print_bench_table(std::ostream& out, const ReportInput& input);

}  // namespace encgraph::host
