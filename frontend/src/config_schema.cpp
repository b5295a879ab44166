#include "config_schema.hpp"

namespace encgraph::host {

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> keys = {
      {"runtime.device", KeyType::String, "\"auto\"",
       "\"auto\" (CUDA when the plugin supports it and a GPU is usable, else CPU), \"cpu\", "
       "\"cuda\" or \"cuda:N\""},
      {"runtime.data_parallel", KeyType::StringArray, "[]",
       "data parallel: one rank per device, all \"cpu\" or all \"cuda:N\", at least two; "
       "empty: one runtime on runtime.device"},
      {"distributed.launch", KeyType::String, "\"auto\"",
       "multi-process data parallelism: \"auto\" joins the job mpirun (or RANK/WORLD_SIZE) "
       "started, \"mpi\" or \"env\" require that launch, \"off\" runs alone"},
      {"distributed.id_file", KeyType::String, "\"\"",
       "RANK/WORLD_SIZE launch: a file every rank sees, where rank 0 leaves its NCCL id"},
      {"distributed.job_id", KeyType::String, "\"\"",
       "RANK/WORLD_SIZE launch: ties the id file to this job; empty: ENCGRAPH_JOB_ID, "
       "SLURM_JOB_ID or TORCHELASTIC_RUN_ID"},
      {"distributed.timeout_s", KeyType::Float, "300",
       "the longest any rank waits for another before the job stops with an error"},
      {"runtime.log_level", KeyType::String, "\"info\"",
       "trace, debug, info, warn, error, critical or off"},
      {"runtime.plugin_dirs", KeyType::StringArray, "[]",
       "directories searched for plugins before ENCGRAPH_PLUGIN_PATH and the default folders"},
      {"runtime.use_graphs", KeyType::Boolean, "true",
       "false runs every batch eagerly at its exact size (no capture)"},
      {"runtime.drop_budget_on_oom", KeyType::Boolean, "false",
       "a budget whose capture runs out of memory is dropped with a warning instead of failing"},
      {"runtime.prefer_faster_path", KeyType::Boolean, "true",
       "after capture, time each graph; run a batch eagerly when that is expected to be clearly "
       "faster than replaying a much larger budget"},
      {"runtime.pipeline_first_batch", KeyType::Boolean, "true",
       "with prefer_faster_path: split a request's first batch when staging the rest during "
       "the head's replay is expected to be faster"},
      {"runtime.overlap_uploads", KeyType::Boolean, "true",
       "CUDA: upload a replay's large inputs on a second stream, overlapping the replay before "
       "(false: in line, saving twice the largest graph's input bytes of device memory)"},
      {"runtime.item_threads", KeyType::Integer, "0",
       "threads that make a request's items (the plugin's preprocessing) when the plugin "
       "allows it (ABI 1.4); 0: one per core, at most 8; 1: the calling thread"},
      {"runtime.poison_memory", KeyType::Boolean, "false",
       "debugging: fill outputs and workspace with NaN before each run"},
      {"runtime.stats_log_interval", KeyType::Integer, "100",
       "log graph hit statistics every N items at debug level (0: never)"},
      {"plugin.name", KeyType::String, "(required)",
       "the plugin to load, as `encgraph plugins` lists it"},
      {"plugin.weights", KeyType::String, "\"\"",
       "a weights path, or \"random\" for weights drawn at start-up; empty: the plugin's default"},
      {"plugin.config", KeyType::Table, "{}",
       "the plugin's own table, handed over flattened (see below)"},
      {"plugin.tuning", KeyType::Table, "{}",
       "options every plugin reads through the runtime (ABI 1.3), not the environment"},
      {"plugin.tuning.cpu_threads", KeyType::Integer, "unset",
       "threads of the CPU path's pool, in [1, 1024]; unset: the CPUs this process may use"},
      {"plugin.tuning.cache_dir", KeyType::String, "unset",
       "the GEMM tuning cache's folder, or \"off\"; unset: $XDG_CACHE_HOME/encgraph, else "
       "~/.cache/encgraph (a plugin's own tuning_cache key wins)"},
      {"budgets.token_budgets", KeyType::IntegerArray, "[]",
       "token budgets to capture a graph for; empty: from the plugin's budget range"},
      {"budgets.token_step", KeyType::Integer, "0",
       "generated budgets: 0 doubles from the smallest to the largest; S > 0 doubles up to S, "
       "then steps by S"},
      {"budgets.paths", KeyType::Table, "{}",
       "per-path budgets: [budgets.paths.<path name>] with token_budgets or token_step, "
       "replacing the global budgets for that path only"},
      {"budgets.max_items_per_batch", KeyType::Integer, "0",
       "most items in one batch, <= the smallest budget; 0: inferred"},
      {"budgets.max_frames_per_batch", KeyType::Integer, "unset",
       "most video frames in one batch; unset: max_items_per_batch x the plugin's frames per "
       "video"},
      {"budgets.video", KeyType::Boolean, "true",
       "false plans no video frames (max_frames_per_batch = 0)"},
      {"workload.kind", KeyType::String, "\"synthetic\"", "\"synthetic\", \"trace\" or \"files\""},
      {"workload.count", KeyType::Integer, "64", "synthetic: number of items"},
      {"workload.seed", KeyType::Integer, "0", "synthetic: seed of sizes, modalities and values"},
      {"workload.sizes", KeyType::SizeArray, "[]",
       "synthetic: [height, width] pairs drawn uniformly; empty: min_side..max_side"},
      {"workload.min_side", KeyType::Integer, "224", "synthetic: smallest height or width"},
      {"workload.max_side", KeyType::Integer, "448", "synthetic: largest height or width"},
      {"workload.side_multiple", KeyType::Integer, "28",
       "synthetic: heights and widths are multiples of this"},
      {"workload.video_fraction", KeyType::Float, "0.0",
       "synthetic: share of items that are videos (0..1)"},
      {"workload.frames", KeyType::Integer, "4", "synthetic: frames of each video"},
      {"workload.trace", KeyType::String, "\"\"", "trace: the JSONL file, one item per line"},
      {"workload.files", KeyType::StringArray, "[]",
       "files: image or video paths or glob patterns (PNG, JPEG; MP4, MOV, MKV, WebM)"},
      {"workload.request_size", KeyType::Integer, "16",
       "items per execute() call; latency is measured per call"},
      {"workload.warmup_requests", KeyType::Integer, "1",
       "requests run once before measuring (not counted)"},
      {"output.embeddings", KeyType::String, "\"\"",
       "safetensors file receiving every item's embeddings"},
      {"output.report", KeyType::String, "\"\"", "JSON report file"},
      {"video.sampling", KeyType::String, "\"auto\"",
       "frame sampling rule for video files: \"auto\" (by plugin.name: qwen3* samples as "
       "Qwen3-VL, any other as Qwen2.5-VL with qwen-vl-utils' indices), \"qwen2_5_vl\", "
       "\"qwen2_5_vl_transformers\" (transformers' Qwen2VLVideoProcessor with "
       "do_sample_frames: arange indices) or \"qwen3_vl\""},
      {"video.fps", KeyType::Float, "unset",
       "frames sampled per second of video; unset: the checkpoint folder's, else 2.0"},
      {"video.min_frames", KeyType::Integer, "unset",
       "fewest frames sampled from a video; unset: the checkpoint folder's, else 4"},
      {"video.max_frames", KeyType::Integer, "unset",
       "most frames sampled from a video; unset: the checkpoint folder's, else 768"},
      {"limits.max_graphs", KeyType::Integer, "256",
       "most graphs one plan may capture (budgets x paths x capture-axis key combinations)"},
      {"limits.max_items", KeyType::Integer, "1000000",
       "most items in one workload (workload.count, trace lines, files)"},
      {"limits.max_request_size", KeyType::Integer, "4096",
       "most items in one request (workload.request_size)"},
      {"limits.max_frames_per_video", KeyType::Integer, "4096", "most frames of one video item"},
      {"limits.max_image_pixels", KeyType::Integer, "178956970",
       "most pixels (height x width) of one image or frame"},
      {"limits.max_text_bytes", KeyType::Integer, "67108864",
       "largest text input read (a trace, a JSON header, a plugin's config file)"},
      {"serve.host", KeyType::String, "\"127.0.0.1\"",
       "serve: the address to listen on (\"0.0.0.0\": every interface)"},
      {"serve.port", KeyType::Integer, "8000",
       "serve: the HTTP port; 0 picks a free one (printed at start)"},
      {"serve.max_queue_delay_us", KeyType::Integer, "2000",
       "serve: the longest a queued item waits for more items before its batch runs"},
      {"serve.max_queue_items", KeyType::Integer, "1024",
       "serve: items queued (decoded, waiting for the engine) past which requests get 429"},
      {"serve.cache_bytes", KeyType::Integer, "2147483648",
       "serve: the embedding cache's byte budget (LRU); 0 disables it"},
      {"serve.max_body_bytes", KeyType::Integer, "67108864",
       "serve: largest request body; larger ones get 413"},
      {"serve.max_items_per_request", KeyType::Integer, "64",
       "serve: most images in one infer request"},
      {"serve.max_pixels", KeyType::Integer, "16777216",
       "serve: most pixels (height x width) of one image in a request (<= "
       "limits.max_image_pixels)"},
      {"serve.request_timeout_ms", KeyType::Integer, "30000",
       "serve: a request not answered in this time gets 504"},
      {"serve.threads", KeyType::Integer, "4", "serve: HTTP and image-decoding threads"},
      {"serve.batches_in_flight", KeyType::Integer, "0",
       "serve: batches queued on the device at once (2: the next computes while one's rows are "
       "copied out; 0: 2 on a GPU, 1 on the CPU)"},
  };
  return keys;
}

const KeySpec* find_key(std::string_view path) {
  for (const auto& k : config_schema())
    if (k.path == path) return &k;
  return nullptr;
}

std::string_view type_phrase(KeyType type) {
  switch (type) {
    case KeyType::String: return "a string";
    case KeyType::Integer: return "an integer";
    case KeyType::Float: return "a number";
    case KeyType::Boolean: return "a boolean";
    case KeyType::StringArray: return "an array of strings";
    case KeyType::IntegerArray: return "an array of integers";
    case KeyType::SizeArray: return "an array of [height, width] integer pairs";
    case KeyType::Table: return "a table";
  }
  return "a value";
}

const std::vector<std::string_view>& config_sections() {
  static const std::vector<std::string_view> sections = {"runtime",  "plugin",      "budgets",
                                                         "workload", "output",      "video",
                                                         "limits",   "distributed", "serve"};
  return sections;
}

}  // namespace encgraph::host
