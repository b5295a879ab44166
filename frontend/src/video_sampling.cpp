#include "video_sampling.hpp"

#include "input_files.hpp"
#include "toml_util.hpp"

#include <encgraph/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace encgraph::host {
namespace {

namespace fs = std::filesystem;

// Python's round() and numpy's/torch's round(): halves to even. nearbyint
// rounds so under the default rounding mode.
int64_t round_half_even(double v) {
  return static_cast<int64_t>(std::nearbyint(v));
}

// np.linspace(0, last, n) rounded: y[i] = i * step + 0, the last value set
// to `last` exactly (numpy's order of operations, float64). torch.linspace
// (qwen-vl-utils) works in float32; its rounded values are the same unless
// the float32 error reaches a value's distance from the nearest half, which
// is at least 1 / (2 (n - 1)) (n is even there, so no value is a half):
// only for videos of over about 10000 frames (docs/media.md).
std::vector<int64_t> linspace_rounded(int64_t last, int64_t n) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  if (n == 1) return {0};
  const double step = static_cast<double>(last) / static_cast<double>(n - 1);
  for (int64_t i = 0; i < n; ++i)
    out.push_back(i == n - 1 ? last : round_half_even(static_cast<double>(i) * step));
  return out;
}

// The processor file of a checkpoint folder: the video processor's own file
// when the folder has one (Qwen3-VL's released folders do), else the image
// processor's (Qwen2.5-VL's holds temporal_patch_size). "" when none.
fs::path folder_file(const std::string& weights) {
  if (weights.empty() || weights == "random") return {};
  std::error_code ec;
  if (!fs::is_directory(weights, ec)) return {};
  for (const char* name : {"video_preprocessor_config.json", "preprocessor_config.json"})
    if (fs::is_regular_file(fs::path(weights) / name, ec)) return fs::path(weights) / name;
  return {};
}

// Reads fps, min_frames, max_frames and temporal_patch_size from the folder
// file into the unset fields (`set_*` false).
void apply_folder(const fs::path& file, SamplingParams& p, bool set_fps, bool set_min,
                  bool set_max) {
  const std::string where = "'" + printable(file.string()) + "'";
  nlohmann::json j = nlohmann::json::parse(
      read_text_input(file, "processor config", 4 << 20, "a fixed cap of 4 MiB"), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(ErrorKind::Input,
                where +
                    " is not a JSON object; the checkpoint folder's processor config "
                    "(plugin.weights) must be the JSON file transformers saves: restore it, "
                    "or set [video] fps, min_frames and max_frames");
  auto read_count = [&](const char* key, int64_t& dst) {
    if (!j.contains(key) || j[key].is_null()) return false;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1 ||
        j[key].get<int64_t>() > (int64_t{1} << 20))
      throw Error(ErrorKind::Input, where + ": '" + key +
                                        "' must be a positive integer; fix the file or set "
                                        "[video] " +
                                        key);
    dst = j[key].get<int64_t>();
    return true;
  };
  bool used = false;
  if (!set_fps && j.contains("fps") && !j["fps"].is_null()) {
    if (!j["fps"].is_number() || !(j["fps"].get<double>() > 0.0) ||
        !std::isfinite(j["fps"].get<double>()))
      throw Error(ErrorKind::Input,
                  where + ": 'fps' must be a positive number; fix the file or set [video] fps");
    p.fps = j["fps"].get<double>();
    used = true;
  }
  if (!set_min) used |= read_count("min_frames", p.min_frames);
  if (!set_max) used |= read_count("max_frames", p.max_frames);
  used |= read_count("temporal_patch_size", p.frame_factor);
  if (used) p.origin += ", " + file.filename().string();
}

}  // namespace

// torch.arange(0, total, total / n).int(): the step in double (Python's
// division), the element count ceil(total / step) as torch computes it, each
// value start + i * step cast to float32 (torch's default dtype) and then
// truncated. The count can exceed n when total / step rounds up; torch then
// samples that many frames too.
namespace {

std::vector<int64_t> arange_truncated(int64_t total, int64_t n) {
  const double step = static_cast<double>(total) / static_cast<double>(n);
  const auto count = static_cast<int64_t>(std::ceil(static_cast<double>(total) / step));
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const auto value = static_cast<float>(static_cast<double>(i) * step);
    out.push_back(std::min<int64_t>(static_cast<int64_t>(value), total - 1));
  }
  return out;
}

}  // namespace

std::string rule_name(SamplingRule rule) {
  switch (rule) {
    case SamplingRule::Qwen3Vl: return "transformers Qwen3VLVideoProcessor.sample_frames";
    case SamplingRule::TransformersQwen2Vl:
      return "transformers Qwen2VLVideoProcessor.sample_frames";
    case SamplingRule::QwenVlUtils: break;
  }
  return "qwen-vl-utils smart_nframes";
}

SamplingParams sampling_params(const VideoConfig& c) {
  SamplingParams p;
  const bool qwen3 =
      c.sampling == "qwen3_vl" || (c.sampling == "auto" && c.plugin.rfind("qwen3", 0) == 0);
  p.rule = qwen3 ? SamplingRule::Qwen3Vl : SamplingRule::QwenVlUtils;
  if (c.sampling == "qwen2_5_vl_transformers") p.rule = SamplingRule::TransformersQwen2Vl;
  // Both families' defaults are the same numbers (FPS 2, 4 to 768 frames,
  // temporal patch 2).
  p.origin = qwen3 ? "qwen3_vl defaults" : "qwen2_5_vl defaults";
  if (const fs::path file = folder_file(c.weights); !file.empty())
    apply_folder(file, p, c.fps.has_value(), c.min_frames.has_value(), c.max_frames.has_value());
  if (c.fps || c.min_frames || c.max_frames) p.origin += ", [video]";
  if (c.fps) p.fps = *c.fps;
  if (c.min_frames) p.min_frames = *c.min_frames;
  if (c.max_frames) p.max_frames = *c.max_frames;
  if (p.max_frames < p.min_frames)
    throw Error(ErrorKind::Config,
                "video sampling: max_frames " + std::to_string(p.max_frames) +
                    " is below min_frames " + std::to_string(p.min_frames) + " (" + p.origin +
                    "); set [video] min_frames and max_frames so that min <= max");
  return p;
}

std::vector<int64_t> sample_frame_indices(const SamplingParams& p, int64_t total,
                                          double video_fps) {
  if (total < 1) throw Error(ErrorKind::Input, "the video has no frames");
  if (!(video_fps > 0.0) || !std::isfinite(video_fps))
    throw Error(ErrorKind::Input, "the video gives no usable frame rate");
  const double t = static_cast<double>(total);
  if (p.rule == SamplingRule::Qwen3Vl) {
    // int(total / fps * sample_fps), then min(max(n, min), max, total).
    const double wanted = std::min(t / video_fps * p.fps, 1e15);
    int64_t n = static_cast<int64_t>(wanted);
    n = std::min({std::max(n, p.min_frames), p.max_frames, total});
    return linspace_rounded(total - 1, n);
  }
  // smart_nframes: min_frames up and max_frames (default min(768, total))
  // down to the factor; n = total / fps * sample_fps clamped to them and to
  // total, then down to the factor; it must lie in [factor, total].
  const auto f = static_cast<double>(p.frame_factor);
  // Transformers' Qwen2VLVideoProcessor takes min_frames as given.
  const double min_f = p.rule == SamplingRule::TransformersQwen2Vl
                           ? static_cast<double>(p.min_frames)
                           : std::ceil(static_cast<double>(p.min_frames) / f) * f;
  const double max_f = std::floor(static_cast<double>(p.max_frames) / f) * f;
  double n = t / video_fps * p.fps;
  n = std::min(std::min(std::max(n, min_f), max_f), t);
  const auto frames = static_cast<int64_t>(std::floor(n / f) * f);
  if (frames < p.frame_factor)
    throw Error(ErrorKind::Input,
                "the video has " + std::to_string(total) + " frame" + (total == 1 ? "" : "s") +
                    " and " + rule_name(p.rule) + " samples at least " +
                    std::to_string(p.frame_factor) +
                    " (the temporal patch size); give a longer video, or a single frame as an "
                    "image");
  if (p.rule == SamplingRule::TransformersQwen2Vl) return arange_truncated(total, frames);
  return linspace_rounded(total - 1, frames);
}

}  // namespace encgraph::host
