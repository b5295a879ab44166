#include "workload.hpp"

#include "glob.hpp"
#include "image_io.hpp"
#include "input_files.hpp"
#include "toml_util.hpp"
#include "video_file.hpp"
#include "video_sampling.hpp"

#include <encgraph/error.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace encgraph::host {
namespace {

// splitmix64: a small generator whose sequence is the same on every platform
// (the standard distributions are not), so a seed names one workload.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }
};

std::vector<std::string> expand(const std::string& pattern) {
  // An existing file is itself, even when its name holds glob characters.
  std::error_code ec;
  if (!has_glob_chars(pattern) || std::filesystem::exists(pattern, ec)) return {pattern};
  std::vector<std::string> out = glob_sorted(pattern);
  if (out.empty())
    throw Error(ErrorKind::Input, "workload.files: the pattern '" + printable(pattern) +
                                      "' matches no file" + glob_hint(pattern));
  return out;
}

// A file's path names its tensor: it must be a name safetensors can hold.
void check_file_id(const std::string& path) {
  if (!is_valid_utf8(path))
    throw Error(ErrorKind::Input,
                "image '" + printable(path) +
                    "': the file's name is not valid UTF-8, and the file's path names its tensor "
                    "in the embeddings file (safetensors names are UTF-8): rename the file or "
                    "link it under a UTF-8 name");
  if (path == "__metadata__")
    throw Error(ErrorKind::Input,
                "image '__metadata__': the file's path names its tensor, and '__metadata__' is "
                "reserved by safetensors: give it as './__metadata__' or rename it");
}

}  // namespace

std::vector<WorkItem> synthetic_workload(const WorkloadConfig& c) {
  Rng rng{c.seed};
  std::vector<WorkItem> items;
  items.reserve(static_cast<size_t>(c.count));
  const int64_t lo = (c.min_side + c.side_multiple - 1) / c.side_multiple;
  const int64_t hi = c.max_side / c.side_multiple;
  for (int64_t i = 0; i < c.count; ++i) {
    WorkItem it;
    it.id = "synthetic/" + std::to_string(i);
    const bool video = c.video_fraction > 0.0 && rng.unit() < c.video_fraction;
    it.modality = video ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
    it.frames = video ? c.frames : 1;
    if (!c.sizes.empty()) {
      const auto& s =
          c.sizes[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(c.sizes.size()) - 1))];
      it.height = s[0];
      it.width = s[1];
    } else {
      it.height = rng.uniform(lo, hi) * c.side_multiple;
      it.width = rng.uniform(lo, hi) * c.side_multiple;
    }
    it.seed = rng.next();
    items.push_back(std::move(it));
  }
  return items;
}

WorkItem video_file_item(const std::string& path, const VideoConfig& video,
                         const LimitsConfig& limits) {
  const VideoInfo info = probe_video(path, limits.max_image_pixels);
  const SamplingParams params = sampling_params(video);
  WorkItem it;
  try {
    it.frame_indices = sample_frame_indices(params, info.total_frames, info.fps);
  } catch (const Error& e) {
    throw Error(e.kind(), "video '" + printable(path) + "': " + e.what());
  }
  const auto sampled = static_cast<int64_t>(it.frame_indices.size());
  if (sampled > limits.max_frames_per_video)
    throw Error(ErrorKind::Input,
                "video '" + printable(path) + "': " + std::to_string(sampled) +
                    " frames sampled (of " + std::to_string(info.total_frames) +
                    "), over the limit of " + std::to_string(limits.max_frames_per_video) +
                    " frames per video (limits.max_frames_per_video sets it; lower "
                    "video.max_frames or video.fps, or raise the limit)");
  it.modality = EG_MODALITY_VIDEO;
  it.video_file = path;
  it.height = info.height;
  it.width = info.width;
  it.frames = sampled;
  it.video_total_frames = info.total_frames;
  it.video_fps = info.fps;
  std::ostringstream fps;  // "2", "1.5": the shortest form
  fps << params.fps;
  it.sampling = rule_name(params.rule) + " (fps " + fps.str() + ", frames " +
                std::to_string(params.min_frames) + ".." + std::to_string(params.max_frames) +
                "; " + params.origin + ")";
  return it;
}

std::vector<WorkItem> file_workload(const std::vector<std::string>& patterns,
                                    const LimitsConfig& limits, const VideoConfig& video) {
  std::vector<WorkItem> items;
  for (const auto& pattern : patterns)
    for (const auto& path : expand(pattern)) {
      if (static_cast<int64_t>(items.size()) >= limits.max_items)
        throw Error(ErrorKind::Input,
                    "workload.files: more than " + std::to_string(limits.max_items) +
                        " image files (limits.max_items sets the limit; raise it or encode the "
                        "files in several runs)");
      check_file_id(path);
      if (is_video_file(path)) {
        WorkItem it = video_file_item(path, video, limits);
        it.id = path;
        items.push_back(std::move(it));
        continue;
      }
      const ImageInfo info = probe_image(path, limits.max_image_pixels);
      WorkItem it;
      it.id = path;
      it.file = path;
      it.height = info.height;
      it.width = info.width;
      items.push_back(std::move(it));
    }
  return items;
}

void make_ids_unique(std::vector<WorkItem>& items) {
  // A repeated id gets "#2", "#3", ... skipping any name another item already
  // uses (ids "a", "a", "a#2" must not end with two "a#2").
  std::set<std::string> taken;
  for (const auto& it : items) taken.insert(it.id);
  std::map<std::string, int> last_suffix;  // per repeated id
  std::set<std::string> seen;
  for (auto& it : items) {
    if (seen.insert(it.id).second) continue;
    int& n = last_suffix.try_emplace(it.id, 1).first->second;
    std::string candidate;
    do candidate = it.id + "#" + std::to_string(++n);
    while (taken.count(candidate));
    taken.insert(candidate);
    it.id = candidate;
  }
}

std::vector<WorkItem> build_workload(const WorkloadConfig& c, const LimitsConfig& limits) {
  // The synthetic settings and the request size are checked against the
  // limits when the config is read (config.cpp); files and traces here, item by item.
  std::vector<WorkItem> items;
  if (c.kind == "synthetic") {
    items = synthetic_workload(c);
  } else if (c.kind == "trace") {
    items = read_trace(c.trace, limits, c.video);
  } else if (c.kind == "files") {
    items = file_workload(c.files, limits, c.video);
  } else {
    throw_config("workload.kind: unknown kind \"" + c.kind + "\"");
  }
  make_ids_unique(items);
  return items;
}

void require_items(const std::vector<WorkItem>& work, const WorkloadConfig& c,
                   const std::string& command) {
  if (!work.empty()) return;
  std::string where;
  if (c.kind == "synthetic")
    where = "synthetic workload, workload.count = 0; set a positive workload.count";
  else if (c.kind == "trace")
    where = "the trace '" + printable(c.trace) +
            "' is empty or holds only blank lines; give it one JSON object per item";
  else
    where = "no files were given; name PNG or JPEG images or MP4, MKV or WebM videos";
  throw Error(ErrorKind::Input, command +
                                    " needs at least one item, and the workload holds none (" +
                                    where + "); nothing was written");
}

}  // namespace encgraph::host
