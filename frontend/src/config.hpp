// The host's configuration: a TOML file plus `--set key.path=value` overrides,
// checked against config_schema() and turned into an encgraph::RuntimeConfig and
// the host's own settings (workload, outputs). Every error is an
// encgraph::Error of kind Config whose message names the key and where it was
// written (file:line:column, or the --set argument).
#pragma once

#include <encgraph/process_group.hpp>
#include <encgraph/runtime.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace encgraph::host {

// [video]: how frames are sampled from a video file (docs/media.md). Unset
// keys come from the checkpoint folder's video_preprocessor_config.json (or
// preprocessor_config.json) when plugin.weights is a folder, else from the
// plugin family's processor defaults.
struct VideoConfig {
  std::string sampling = "auto";  // auto | qwen2_5_vl | qwen3_vl
  std::optional<double> fps;
  std::optional<int64_t> min_frames;
  std::optional<int64_t> max_frames;
  // Copied from plugin.name and plugin.weights: the family's rule and the
  // checkpoint folder are picked from them.
  std::string plugin;
  std::string weights;
};

struct WorkloadConfig {
  std::string kind = "synthetic";  // synthetic | trace | files
  int64_t count = 64;
  uint64_t seed = 0;
  std::vector<std::array<int64_t, 2>> sizes;  // [height, width]; empty: min/max side
  int64_t min_side = 224;
  int64_t max_side = 448;
  int64_t side_multiple = 28;
  double video_fraction = 0.0;
  int64_t frames = 4;
  std::string trace;
  std::vector<std::string> files;
  int64_t request_size = 16;
  int64_t warmup_requests = 1;
  VideoConfig video;  // sampling of video files (traces' "video", encode's files)
};

struct OutputConfig {
  std::string embeddings;  // safetensors path, empty: none
  std::string report;      // JSON path, empty: none
};

// Bounds on what one run may ask for, so that a typo fails with an error naming
// the key instead of exhausting the machine ([limits] in docs/config.md).
struct LimitsConfig {
  int64_t max_graphs = kDefaultMaxGraphs;  // graphs one plan may capture
  int64_t max_items = 1000000;             // items in one workload
  int64_t max_request_size = 4096;         // items in one request
  int64_t max_frames_per_video = 4096;     // frames of one video item
  int64_t max_image_pixels = 178956970;    // height * width of one image (Pillow's bound)
  int64_t max_text_bytes = 64ll << 20;     // a config, trace or JSON header read as text
};

// [serve]: the `encgraph serve` endpoint (docs/serving.md). Read by every
// command but used by serve alone; left out of the config digest, since it
// changes no embedding.
struct ServeConfig {
  std::string host = "127.0.0.1";
  int64_t port = 8000;                     // 0: any free port (printed at start)
  int64_t max_queue_delay_us = 2000;       // oldest queued item's longest wait for a batch
  int64_t max_queue_items = 1024;          // queued items past which requests get 429
  int64_t cache_bytes = int64_t{2} << 30;  // embedding cache; 0 disables it
  int64_t max_body_bytes = int64_t{64} << 20;
  int64_t max_items_per_request = 64;
  int64_t max_pixels = 16777216;  // height * width of one image in a request
  int64_t request_timeout_ms = 30000;
  int64_t threads = 4;  // HTTP and decoding threads
  // Batches queued on the device at once: 2 lets the next batch compute while
  // one's rows are copied out and answered; 0 picks 2 on a GPU, 1 on the CPU.
  int64_t batches_in_flight = 0;
};

// The largest config file read (docs/config.md, "Limits"): fixed, since the
// limits themselves are read from the config.
inline constexpr int64_t kMaxConfigBytes = int64_t{4} << 20;

struct HostConfig {
  RuntimeConfig runtime;
  // runtime.data_parallel: one rank per device ("cpu" repeated, or distinct
  // "cuda:N"), run through a DataParallelRuntime. Empty: one Runtime on
  // runtime.device. Kept out of RuntimeConfig, which is the core's, per rank.
  std::vector<std::string> data_parallel;
  // runtime.distributed: joining a multi-process job (mpirun, or RANK/WORLD_SIZE).
  DistributedConfig distributed;
  std::string log_level = "info";
  WorkloadConfig workload;
  OutputConfig output;
  LimitsConfig limits;
  ServeConfig serve;
  std::string source;  // the file as given ("" for text configs)
  std::string digest;  // 16 hex digits over the resolved settings (see canonical_config)
};

// How the caller will use the config. `workload_replaced`: the command supplies
// its own workload (encode's files or trace), so the config's synthetic
// workload bounds (count, frames, sizes) are not held against it.
struct ConfigUse {
  bool workload_replaced = false;
};

// Reads `file` and applies the overrides ("key.path=value", in order).
HostConfig load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                       ConfigUse use = {});
// The same for TOML text; `source_name` stands for the file in messages.
HostConfig load_config_text(std::string_view text, const std::string& source_name,
                            const std::vector<std::string>& overrides, ConfigUse use = {});

// The 16-hex-digit digest of canonical_config(config); recompute it after
// changing a resolved config (encode replacing the workload).
std::string config_digest(const HostConfig& config);

// Every resolved setting as sorted "key = value" lines, defaults included, so
// that two configs meaning the same thing give the same digest.
std::string canonical_config(const HostConfig& config);

// Throws a Config error unless `device` is auto, cpu, cuda or cuda:N.
void check_device_string(const std::string& device, const std::string& where);

// The device the config's work runs on: the first data-parallel rank's when
// runtime.data_parallel is set, else runtime.device.
const std::string& execution_device(const HostConfig& config);

}  // namespace encgraph::host
