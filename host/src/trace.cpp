// The JSONL trace reader (see workload.hpp for the format).
#include "image_io.hpp"
#include "workload.hpp"

#include <encgraph/error.hpp>

#include <nlohmann/json.hpp>

#include <fstream>

namespace encgraph::host {
namespace {

struct LineError {
  std::string message;
};

int64_t positive(const nlohmann::json& obj, const char* field) {
  const auto& v = obj.at(field);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    throw LineError{std::string("'") + field + "' must be a positive integer, got " + v.dump()};
  return v.get<int64_t>();
}

// `number` names the item and seeds its values unless the line says otherwise.
WorkItem parse_line(const std::string& line, int64_t number,
                    const std::filesystem::path& base_dir) {
  nlohmann::json obj;
  try {
    obj = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message starts with its own "[json.exception...]" tag: keep the reason only.
    std::string what = e.what();
    const size_t colon = what.find("parse error");
    throw LineError{"not valid JSON: " + (colon == std::string::npos ? what : what.substr(colon))};
  }
  if (!obj.is_object())
    throw LineError{"expected a JSON object, got " + std::string(obj.type_name())};
  static const char* const known[] = {"modality", "height", "width", "frames",
                                      "file",     "id",     "seed"};
  for (const auto& [key, value] : obj.items()) {
    (void)value;
    if (std::find(std::begin(known), std::end(known), key) == std::end(known))
      throw LineError{"unknown field '" + key +
                      "' (known: modality, height, width, frames, file, id, seed)"};
  }
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
      throw LineError{"'modality' must be \"image\" or \"video\", got " + m.dump()};
  }
  if (obj.contains("frames")) it.frames = positive(obj, "frames");
  if (it.modality == EG_MODALITY_IMAGE && it.frames != 1)
    throw LineError{"an image has exactly one frame, got frames = " + std::to_string(it.frames)};
  if (obj.contains("file")) {
    if (!obj["file"].is_string())
      throw LineError{"'file' must be a string, got " + obj["file"].dump()};
    if (it.modality == EG_MODALITY_VIDEO)
      throw LineError{"'file' is supported for images only (videos are given by geometry)"};
    std::filesystem::path p = obj["file"].get<std::string>();
    if (p.is_relative()) p = base_dir / p;
    it.file = p.string();
    ImageInfo info;
    try {
      info = probe_image(p);
    } catch (const Error& e) {
      throw LineError{e.what()};
    }
    it.height = info.height;
    it.width = info.width;
    for (const char* f : {"height", "width"})
      if (obj.contains(f) && positive(obj, f) != (f[0] == 'h' ? info.height : info.width))
        throw LineError{std::string("'") + f + "' = " + obj[f].dump() +
                        " disagrees with the file's " +
                        std::to_string(f[0] == 'h' ? info.height : info.width)};
  } else {
    for (const char* f : {"height", "width"})
      if (!obj.contains(f))
        throw LineError{std::string("'") + f + "' is required (or give a 'file')"};
    it.height = positive(obj, "height");
    it.width = positive(obj, "width");
  }
  if (obj.contains("id")) {
    if (!obj["id"].is_string()) throw LineError{"'id' must be a string, got " + obj["id"].dump()};
    it.id = obj["id"].get<std::string>();
  }
  if (obj.contains("seed")) {
    if (!obj["seed"].is_number_unsigned())
      throw LineError{"'seed' must be a non-negative integer, got " + obj["seed"].dump()};
    it.seed = obj["seed"].get<uint64_t>();
  }
  return it;
}

}  // namespace

std::vector<WorkItem> parse_trace(std::istream& in, const std::string& name,
                                  const std::filesystem::path& base_dir) {
  std::vector<WorkItem> items;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      items.push_back(parse_line(line, number, base_dir));
    } catch (const LineError& e) {
      throw_config(name + ":" + std::to_string(number) + ": " + e.message);
    }
  }
  return items;
}

std::vector<WorkItem> read_trace(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw_config("workload.trace: cannot read '" + file.string() + "' (does it exist?)");
  return parse_trace(in, file.string(), file.parent_path());
}

}  // namespace encgraph::host
