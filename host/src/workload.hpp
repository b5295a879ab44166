// A workload: the items a command runs, as descriptions (geometry, or a file
// to decode), made into plugin items one request at a time so that memory
// stays bounded by the request size.
#pragma once

#include "config.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <filesystem>
#include <istream>
#include <string>
#include <vector>

namespace encgraph::host {

struct WorkItem {
  std::string id;  // names the item's tensor in the embeddings file
  eg_modality modality = EG_MODALITY_IMAGE;
  int64_t height = 0;
  int64_t width = 0;
  int64_t frames = 1;
  std::string file;  // an image, decoded when the item is made
  // A video's frames, one image file each, in order; decoded when the item is
  // made (holding every video's pixels from the start would not fit memory).
  std::vector<std::string> frame_files;
  // A video file (MP4, MKV, WebM): the frames at `frame_indices`, sampled by
  // the model family's rule when the workload was read, are decoded when the
  // item is made. `frames` is their count.
  std::string video_file;
  std::vector<int64_t> frame_indices;
  int64_t video_total_frames = 0;  // the stream's frames
  double video_fps = 0.0;          // the stream's average frame rate
  std::string sampling;            // the rule and where its values came from
  uint64_t seed = 0;               // synthetic values, when no file is set
};

// One video item from a video file: probed (limits.max_image_pixels per
// frame), its frames sampled by `video`'s rule, their count within
// limits.max_frames_per_video. Errors (kind Input) name the file.
WorkItem video_file_item(const std::string& path, const VideoConfig& video,
                         const LimitsConfig& limits);

// The configured workload (synthetic, trace or files), every item within
// `limits` (items, frames per video, pixels per image, request size): an
// error names the item (a trace's line) and the limit's key.
std::vector<WorkItem> build_workload(const WorkloadConfig& config,
                                     const LimitsConfig& limits = LimitsConfig{});

// An empty workload is an error before anything runs or is written (an
// output would otherwise be replaced by an empty file): "<command> needs at
// least one item", saying where items were looked for.
void require_items(const std::vector<WorkItem>& work, const WorkloadConfig& config,
                   const std::string& command);

// `count` items with sizes drawn from the configured distribution.
std::vector<WorkItem> synthetic_workload(const WorkloadConfig& config);

// One JSON object per line: {"modality": "image"|"video", "height": H, "width": W,
// "frames": F, "file": "path", "frames_files": ["path", ...], "frames_glob":
// "pattern", "id": "name", "seed": S}; every field optional except the geometry
// (height and width, unless files give them). `file` is an image; `frames_files`
// (or `frames_glob`, its matches sorted) a video's frames, every one probed:
// same size, same channel count. Blank lines are skipped. Ids must be unique,
// non-empty, free of control characters and not "__metadata__". Errors (kind
// Input) name the file and line. Relative files and patterns are resolved
// against the trace's folder. The file must be a regular file of at most
// limits.max_text_bytes.
// {"video": "clip.mp4"} is a video file (video_file_item), sampled by `video`.
std::vector<WorkItem> read_trace(const std::filesystem::path& file,
                                 const LimitsConfig& limits = LimitsConfig{},
                                 const VideoConfig& video = VideoConfig{});
std::vector<WorkItem> parse_trace(std::istream& in, const std::string& name,
                                  const std::filesystem::path& base_dir,
                                  const LimitsConfig& limits = LimitsConfig{},
                                  const VideoConfig& video = VideoConfig{});

// Image and video files from paths or glob patterns, in the order given (each
// pattern's matches sorted); the geometry is read from each file's header. A
// video file (is_video_file: its extension or signature) is one video item.
// A file's path is its id: one that is not UTF-8 (safetensors names are) is
// refused.
std::vector<WorkItem> file_workload(const std::vector<std::string>& patterns,
                                    const LimitsConfig& limits = LimitsConfig{},
                                    const VideoConfig& video = VideoConfig{});

// Tensor names must be unique: repeated ids get "#2", "#3", ... appended (a
// file named twice in a files workload; trace ids are checked when read).
void make_ids_unique(std::vector<WorkItem>& items);

}  // namespace encgraph::host
