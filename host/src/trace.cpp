// The JSONL trace reader (see workload.hpp for the format).
#include "glob.hpp"
#include "image_io.hpp"
#include "input_files.hpp"
#include "toml_util.hpp"
#include "video_frames.hpp"
#include "workload.hpp"

#include <encgraph/error.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <sstream>

namespace encgraph::host {
namespace {

struct LineError {
  std::string message;
};

// A JSON value as a message shows it: at most about 60 bytes, so that a
// megabyte-long value does not become a megabyte-long message.
std::string shown(const nlohmann::json& v) {
  const std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return abbreviated(text);
}

// nlohmann's parse error without its "[json.exception...]" tag, the token it
// quotes ("last read: '...'") cut short.
std::string parse_error_text(const std::string& what) {
  const size_t start = what.find("parse error");
  std::string text = start == std::string::npos ? what : what.substr(start);
  const std::string mark = "last read: '";
  const size_t open = text.find(mark);
  if (open == std::string::npos) return text;
  const size_t begin = open + mark.size();
  size_t end = text.find("'; expected", begin);
  if (end == std::string::npos) end = text.rfind('\'');
  if (end == std::string::npos || end < begin) return text;
  return text.substr(0, begin) + abbreviated(text.substr(begin, end - begin)) + text.substr(end);
}

// The line as one JSON object; a key given twice (which nlohmann would
// silently resolve to its last value) is an error.
nlohmann::json parse_object(const std::string& line) {
  if (const size_t nul = line.find('\0'); nul != std::string::npos)
    throw LineError{"the line holds a NUL byte (column " + std::to_string(nul + 1) +
                    "); a trace is UTF-8 text: remove it or re-save the trace"};
  std::vector<std::set<std::string>> keys;  // per open object
  std::string duplicate;
  const nlohmann::json::parser_callback_t check = [&](int depth,
                                                      nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty() && depth == 1)
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json obj;
  try {
    obj = nlohmann::json::parse(line, check);
  } catch (const nlohmann::json::parse_error& e) {
    throw LineError{"not valid JSON: " + parse_error_text(e.what())};
  } catch (const nlohmann::json::exception& e) {
    // 1e400 and the like: nlohmann reports an out-of-range number apart,
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    const std::string what = e.what();
    const size_t open = what.find('\''), close = what.rfind('\'');
    const std::string number = open < close ? what.substr(open + 1, close - open - 1) : what;
    throw LineError{"not valid JSON: the number " + abbreviated(number) +
                    " is out of range; sizes, frames and seeds are integers that fit in 64 bits"};
  }
  if (!duplicate.empty())
    throw LineError{"field '" + printable(abbreviated(duplicate)) +
                    "' is given twice; give each field once"};
  return obj;
}

int64_t positive(const nlohmann::json& obj, const char* field) {
  const auto& v = obj.at(field);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    throw LineError{std::string("'") + field + "' must be a positive integer, got " + shown(v)};
  return v.get<int64_t>();
}

std::filesystem::path resolve(const std::string& path, const std::filesystem::path& base_dir) {
  std::filesystem::path p = path;
  return p.is_relative() ? base_dir / p : p;
}

// Frames of one video, before any is read: a line may ask for a million.
void check_frame_count(int64_t frames, const std::string& what, const LimitsConfig& limits) {
  if (frames > limits.max_frames_per_video)
    throw LineError{what + " " + std::to_string(frames) + " frames, over the limit of " +
                    std::to_string(limits.max_frames_per_video) +
                    " frames per video (limits.max_frames_per_video sets it; split the video "
                    "or raise the limit)"};
}

// A line's height and width, when given next to files, must be what the files
// hold (`whose`: "the file's", "the frames'").
void check_geometry(const nlohmann::json& obj, const ImageInfo& info, const std::string& whose) {
  for (const char* f : {"height", "width"}) {
    const int64_t actual = f[0] == 'h' ? info.height : info.width;
    if (obj.contains(f) && positive(obj, f) != actual)
      throw LineError{std::string("'") + f + "' = " + obj[f].dump() + " disagrees with " + whose +
                      " " + std::to_string(actual)};
  }
}

// A video's frames from 'frames_files' (a list) or 'frames_glob' (a pattern,
// matches sorted): sets the item's frame files, frame count and geometry.
// Every frame's header is read here, so that a bad frame stops the trace
// before anything runs; the pixels are decoded when the item is made.
void read_video_frames(const nlohmann::json& obj, WorkItem& it,
                       const std::filesystem::path& base_dir, const LimitsConfig& limits) {
  if (obj.contains("frames_files") && obj.contains("frames_glob"))
    throw LineError{"give a video's frames as 'frames_files' or 'frames_glob', not both"};
  const bool listed = obj.contains("frames_files");
  const char* key = listed ? "frames_files" : "frames_glob";
  std::vector<std::string> files;
  if (listed) {
    const auto& list = obj["frames_files"];
    if (!list.is_array() || list.empty())
      throw LineError{"'frames_files' must be a non-empty array of frame image paths, got " +
                      shown(list)};
    check_frame_count(static_cast<int64_t>(list.size()), "'frames_files' lists", limits);
    for (const auto& f : list) {
      if (!f.is_string())
        throw LineError{"'frames_files' must hold strings (frame image paths), got " + shown(f)};
      files.push_back(resolve(f.get<std::string>(), base_dir).string());
    }
  } else {
    const auto& pattern = obj["frames_glob"];
    if (!pattern.is_string())
      throw LineError{"'frames_glob' must be a string (a pattern such as \"clip/*.png\"), got " +
                      shown(pattern)};
    const std::filesystem::path given = pattern.get<std::string>();
    // The trace's folder is a literal prefix, whatever characters its name holds.
    const std::string resolved =
        given.is_relative()
            ? (std::filesystem::path(glob_escape(base_dir.string())) / given).string()
            : given.string();
    files = glob_sorted(resolved);
    check_frame_count(static_cast<int64_t>(files.size()), "'frames_glob' matches", limits);
    if (files.empty())
      throw LineError{"'frames_glob' " + shown(pattern) + " matches no file (looked for '" +
                      printable(abbreviated(resolved)) +
                      "'; relative patterns are resolved against the trace's folder" +
                      glob_hint(given.string()) + ")"};
  }
  const auto count = static_cast<int64_t>(files.size());
  if (obj.contains("frames") && it.frames != count)
    throw LineError{"'frames' = " + std::to_string(it.frames) + " but '" + key + "' gives " +
                    std::to_string(count) +
                    " frame files; drop 'frames' (the files give the count) or make them agree"};
  ImageInfo info;
  try {
    info = probe_frames(files, limits.max_image_pixels);
  } catch (const Error& e) {
    throw LineError{std::string("'") + key + "': " + e.what()};
  }
  check_geometry(obj, info, "the frames'");
  it.frames = count;
  it.height = info.height;
  it.width = info.width;
  it.frame_files = std::move(files);
}

// An id names a tensor of the embeddings file: checked here, so that a bad
// one stops the trace before anything runs.
void check_id(const std::string& id) {
  if (id.empty())
    throw LineError{
        "'id' is empty; give the item a name, or leave 'id' out (the item is then "
        "named trace/<line>)"};
  if (id == "__metadata__")
    throw LineError{
        "'id' \"__metadata__\" is reserved by the safetensors format (it holds the "
        "file's metadata); choose another id"};
  for (unsigned char ch : id)
    if (ch < 0x20 || ch == 0x7F)
      throw LineError{"'id' " + shown(nlohmann::json(id)) +
                      " holds a control character; ids name tensors: use printable characters"};
}

// The id and seed a line gives, checked.
void read_id_and_seed(const nlohmann::json& obj, WorkItem& it);

// {"video": "clip.mp4"}: a video file, its frames sampled by the family's
// rule. The geometry and frame count come from the file: given beside it,
// they must agree with it.
WorkItem parse_video_line(const nlohmann::json& obj, int64_t number,
                          const std::filesystem::path& base_dir, const LimitsConfig& limits,
                          const VideoConfig& video) {
  for (const char* other : {"file", "frames_files", "frames_glob"})
    if (obj.contains(other))
      throw LineError{std::string("'video' is a video file and '") + other +
                      "' another input; give one of them per line"};
  if (obj.contains("modality") && obj["modality"] != "video")
    throw LineError{
        "'video' is a video file; set \"modality\": \"video\" or leave 'modality' "
        "out, got " +
        shown(obj["modality"])};
  if (!obj["video"].is_string() || obj["video"].get<std::string>().empty())
    throw LineError{"'video' must be a video file's path (MP4, MKV or WebM), got " +
                    shown(obj["video"])};
  const std::string path = resolve(obj["video"].get<std::string>(), base_dir).string();
  WorkItem it;
  try {
    it = video_file_item(path, video, limits);
  } catch (const Error& e) {
    throw LineError{e.what()};
  }
  check_geometry(obj, ImageInfo{it.height, it.width, 3}, "the video's");
  if (obj.contains("frames") && positive(obj, "frames") != it.frames)
    throw LineError{"'frames' = " + obj["frames"].dump() + " but the video's sampling gives " +
                    std::to_string(it.frames) + " frames (" + it.sampling +
                    "); drop 'frames' or set [video] fps, min_frames and max_frames"};
  it.id = "trace/" + std::to_string(number);
  it.seed = static_cast<uint64_t>(number);
  read_id_and_seed(obj, it);
  return it;
}

// `number` names the item and seeds its values unless the line says otherwise.
WorkItem parse_line(const std::string& line, int64_t number, const std::filesystem::path& base_dir,
                    const LimitsConfig& limits, const VideoConfig& video) {
  // JSON text is UTF-8; nlohmann's message for a stray byte does not say so.
  if (!is_valid_utf8(line))
    throw LineError{"the line is not valid UTF-8 ('" + printable(line.substr(0, 80)) +
                    "'); JSON text, ids and paths included, must be UTF-8: re-save the trace "
                    "as UTF-8"};
  const nlohmann::json obj = parse_object(line);
  if (!obj.is_object())
    throw LineError{"expected a JSON object, got " + std::string(obj.type_name())};
  static const char* const known[] = {"modality", "height", "width", "frames",       "file",
                                      "video",    "id",     "seed",  "frames_files", "frames_glob"};
  for (const auto& [key, value] : obj.items()) {
    (void)value;
    if (std::find(std::begin(known), std::end(known), key) == std::end(known))
      throw LineError{"unknown field '" + printable(abbreviated(key)) +
                      "' (known: modality, height, width, frames, file, video, frames_files, "
                      "frames_glob, id, seed)"};
  }
  if (obj.contains("video")) return parse_video_line(obj, number, base_dir, limits, video);
  // Frame files make a video, so 'modality' may be left out.
  const bool has_frames = obj.contains("frames_files") || obj.contains("frames_glob");
  if (has_frames && obj.contains("file"))
    throw LineError{
        "'file' is one image and 'frames_files' or 'frames_glob' a video's frames; "
        "give one of them per line"};
  WorkItem it;
  it.id = "trace/" + std::to_string(number);
  it.seed = static_cast<uint64_t>(number);
  if (obj.contains("modality")) {
    const auto& m = obj["modality"];
    if (m == "image")
      it.modality = EG_MODALITY_IMAGE;
    else if (m == "video")
      it.modality = EG_MODALITY_VIDEO;
    else
      throw LineError{"'modality' must be \"image\" or \"video\", got " + shown(m)};
  } else if (has_frames) {
    it.modality = EG_MODALITY_VIDEO;
  }
  if (has_frames && it.modality != EG_MODALITY_VIDEO)
    throw LineError{
        "'frames_files' and 'frames_glob' give a video's frames; set "
        "\"modality\": \"video\" or leave 'modality' out (an image is a 'file')"};
  if (obj.contains("frames")) {
    it.frames = positive(obj, "frames");
    check_frame_count(it.frames, "'frames' asks for", limits);
  }
  if (it.modality == EG_MODALITY_IMAGE && it.frames != 1)
    throw LineError{"an image has exactly one frame, got frames = " + std::to_string(it.frames)};
  if (obj.contains("file")) {
    if (!obj["file"].is_string())
      throw LineError{"'file' must be a string, got " + shown(obj["file"])};
    if (it.modality == EG_MODALITY_VIDEO)
      throw LineError{
          "'file' is one image; give a video's frames as 'frames_files' (a list of "
          "image files) or 'frames_glob' (a pattern), or give its geometry"};
    const std::filesystem::path p = resolve(obj["file"].get<std::string>(), base_dir);
    it.file = p.string();
    ImageInfo info;
    try {
      info = probe_image(p, limits.max_image_pixels);
    } catch (const Error& e) {
      throw LineError{e.what()};
    }
    it.height = info.height;
    it.width = info.width;
    check_geometry(obj, info, "the file's");
  } else if (has_frames) {
    read_video_frames(obj, it, base_dir, limits);
  } else {
    for (const char* f : {"height", "width"})
      if (!obj.contains(f))
        throw LineError{std::string("'") + f +
                        "' is required (or give a 'file', 'frames_files' or 'frames_glob')"};
    it.height = positive(obj, "height");
    it.width = positive(obj, "width");
    // A synthetic item's pixels are made from its geometry: bound them as a file's.
    if (it.height > limits.max_image_pixels / it.width)
      throw LineError{std::to_string(it.width) + "x" + std::to_string(it.height) +
                      " is too large: over the limit of " +
                      std::to_string(limits.max_image_pixels) +
                      " pixels per image or frame (limits.max_image_pixels sets it)"};
  }
  read_id_and_seed(obj, it);
  return it;
}

void read_id_and_seed(const nlohmann::json& obj, WorkItem& it) {
  if (obj.contains("id")) {
    if (!obj["id"].is_string()) throw LineError{"'id' must be a string, got " + shown(obj["id"])};
    it.id = obj["id"].get<std::string>();
    check_id(it.id);
  }
  if (obj.contains("seed")) {
    // -0 is an integer 0 to the parser, and a valid seed.
    const auto& seed = obj["seed"];
    if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() == 0))
      throw LineError{"'seed' must be a non-negative integer, got " + shown(obj["seed"])};
    it.seed = seed.is_number_unsigned() ? seed.get<uint64_t>() : 0;
  }
}

// " (id \"clip\")" when a failing line gives an id, so that the message
// names the item as the user knows it; "" otherwise.
std::string id_note(const std::string& line) {
  const auto obj = nlohmann::json::parse(line, nullptr, false);
  if (obj.is_object() && obj.contains("id") && obj["id"].is_string() &&
      !obj["id"].get<std::string>().empty())
    return " (id " + obj["id"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ")";
  return "";
}

}  // namespace

std::vector<WorkItem> parse_trace(std::istream& in, const std::string& name,
                                  const std::filesystem::path& base_dir, const LimitsConfig& limits,
                                  const VideoConfig& video) {
  std::vector<WorkItem> items;
  std::map<std::string, int64_t> line_of_id;  // each id's line, to name both of a pair
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      if (static_cast<int64_t>(items.size()) >= limits.max_items)
        throw LineError{"the trace holds more than " + std::to_string(limits.max_items) +
                        " items (limits.max_items sets the limit; split the trace or raise it)"};
      WorkItem it = parse_line(line, number, base_dir, limits, video);
      const auto [at, fresh] = line_of_id.emplace(it.id, number);
      if (!fresh)
        throw LineError{"id " + shown(nlohmann::json(it.id)) + " is already the id of line " +
                        std::to_string(at->second) +
                        " (an item without 'id' is named trace/<line>); ids name the tensors of "
                        "the embeddings file and must be unique: give one of them another id"};
      items.push_back(std::move(it));
    } catch (const LineError& e) {
      throw Error(ErrorKind::Input, printable(name) + ":" + std::to_string(number) + id_note(line) +
                                        ": " + e.message);
    }
  }
  return items;
}

std::vector<WorkItem> read_trace(const std::filesystem::path& file, const LimitsConfig& limits,
                                 const VideoConfig& video) {
  // A regular file only (a FIFO would block, /dev/zero never end), capped.
  std::istringstream in(read_text_input(file, "trace", limits.max_text_bytes));
  return parse_trace(in, file.string(), file.parent_path(), limits, video);
}

}  // namespace encgraph::host
