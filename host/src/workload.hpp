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
  uint64_t seed = 0;  // synthetic values, when neither `file` nor `frame_files` is set
};

// The configured workload (synthetic, trace or files).
std::vector<WorkItem> build_workload(const WorkloadConfig& config);

// `count` items with sizes drawn from the configured distribution.
std::vector<WorkItem> synthetic_workload(const WorkloadConfig& config);

// One JSON object per line: {"modality": "image"|"video", "height": H, "width": W,
// "frames": F, "file": "path", "frames_files": ["path", ...], "frames_glob":
// "pattern", "id": "name", "seed": S}; every field optional except the geometry
// (height and width, unless files give them). `file` is an image; `frames_files`
// (or `frames_glob`, its matches sorted) a video's frames, every one probed:
// same size, same channel count. Blank lines are skipped. Errors name the file
// and line. Relative files and patterns are resolved against the trace's folder.
std::vector<WorkItem> read_trace(const std::filesystem::path& file);
std::vector<WorkItem> parse_trace(std::istream& in, const std::string& name,
                                  const std::filesystem::path& base_dir);

// Image files from paths or glob patterns, in the order given (each pattern's
// matches sorted); the geometry is read from each file's header.
std::vector<WorkItem> file_workload(const std::vector<std::string>& patterns);

// Tensor names must be unique: repeated ids get "#2", "#3", ... appended.
void make_ids_unique(std::vector<WorkItem>& items);

}  // namespace encgraph::host
