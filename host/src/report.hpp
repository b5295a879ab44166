// The run report: one JSON document (schema "encgraph.report/1") with what ran,
// where (with data parallelism: on which ranks), under which plan, and per mode (graphs, eager) the
// throughput, latency percentiles and graph statistics; plus the human-readable forms printed on
// stdout (a summary for run, a side-by-side table for bench).
#pragma once

#include "config.hpp"
#include "executor.hpp"
#include "output_files.hpp"

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
  int64_t out_hidden_size = 0;
  int32_t out_dtype = 0;
  int64_t workload_items = 0;
  std::vector<ModeResult> modes;
  std::optional<double> max_abs_diff;  // bench: graphs vs eager outputs of the first request
};

// Facts of a runtime (plugin, device, plan, output) copied into `input`.
void describe_runtime(const Runtime& runtime, ReportInput& input);
// The same for an engine: its first runtime's facts, and its ranks' devices
// when data parallel.
void describe_engine(const Engine& engine, ReportInput& input);

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
