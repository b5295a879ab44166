#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/input_file.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

namespace encoder_kit {
namespace {

// A float as messages print it: the shortest text that reads back as the
// same value (0.5, 1e+300), not std::to_string's fixed six decimals.
std::string format_double(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Why `doc`, a config.json without vision_config, is a whole model's config
// rather than a bare vision config, or "" when nothing says so. A vision
// tower's config has no vocabulary and no text half.
std::string whole_model_sign(const Json& doc) {
  if (doc.find("text_config")) return "a text_config";
  if (doc.find("vocab_size")) return "a vocab_size";
  if (const Json* a = doc.find("architectures"); a && a->is_array())
    for (const Json& e : a->as_array("architectures"))
      if (e.is_string()) {
        const std::string name = e.as_string("architectures entry");
        for (const char* kind : {"ForConditionalGeneration", "ForCausalLM"})
          if (name.find(kind) != std::string::npos) return "architecture '" + name + "'";
      }
  return "";
}

// A file of a checkpoint folder: its path when it is a regular file, "" when
// it is absent. Anything else there is refused: skipping it would run the
// tower on defaults.
std::string folder_file(const std::filesystem::path& dir, const char* name) {
  const std::filesystem::path path = dir / name;
  switch (file_kind(path)) {
    case FileKind::Regular: return path.string();
    case FileKind::Missing: {
      std::error_code ec;
      if (!std::filesystem::is_symlink(path, ec)) return "";
      fail(EG_ERR_INVALID_ARGUMENT,
           "plugin.weights folder '" + dir.string() + "': " + name + " '" + path.string() +
               "' is a broken symbolic link: point it at the checkpoint's " + name +
               " or remove it");
    }
    case FileKind::Directory:
    case FileKind::Other: break;
  }
  const std::string kind = special_file_kind(path);
  fail(EG_ERR_INVALID_ARGUMENT,
       "plugin.weights folder '" + dir.string() + "': " + name + " '" + path.string() + "' is " +
           kind + (kind == "a directory" ? "" : ", not a regular file") +
           ": replace it with the checkpoint's " + name + " (or remove it)");
}

// A pixel bound of a preprocessor file as the Qwen processors read it: the
// flat key (min_pixels) when present, else the size entry (size.shortest_edge).
struct PixelBound {
  std::string name;
  int64_t value = 0;
};
std::optional<PixelBound> pixel_bound(const PreprocessorJson& j, const char* flat,
                                      const char* size_sub) {
  for (const auto& [key, sub] : {std::pair<const char*, const char*>{flat, nullptr},
                                 std::pair<const char*, const char*>{"size", size_sub}}) {
    const Json* v = j.find(key, sub);
    if (!v || !v->is_number()) continue;
    const std::string name = sub ? std::string(key) + "." + sub : std::string(key);
    return PixelBound{name, v->as_int(j.where() + name)};
  }
  return std::nullopt;
}

// The lower pixel bound above the upper one would surface later as a bound
// out of range, naming neither this file nor the contradiction.
void require_ordered_pixels(const PreprocessorJson& j, const std::string& plugin) {
  const auto lo = pixel_bound(j, "min_pixels", "shortest_edge");
  const auto hi = pixel_bound(j, "max_pixels", "longest_edge");
  if (!lo || !hi || lo->value <= hi->value) return;
  fail(EG_ERR_INVALID_ARGUMENT,
       plugin + ": " + j.where() + "has " + lo->name + " = " + std::to_string(lo->value) +
           " above " + hi->name + " = " + std::to_string(hi->value) +
           ": the lower pixel bound exceeds the upper one; fix the file (or set both "
           "min_pixels and max_pixels in [plugin.config] and remove them from it)");
}

}  // namespace

VisionConfigJson::VisionConfigJson(const std::string& path, const std::string& plugin)
    : path_(path), where_("config_json '" + path + "' vision_config.") {
  const std::string key = plugin + ": [plugin.config] config_json";
  const std::string text =
      read_text_input(path, key, "name a model's config.json (or a bare vision config)");
  Json doc = Json::parse(text, key + " '" + path + "'");
  if (!doc.is_object()) fail(EG_ERR_INVALID_ARGUMENT, key + " '" + path + "' is not a JSON object");
  const Json* v = doc.find("vision_config");
  if (!v) {
    if (const std::string sign = whole_model_sign(doc); !sign.empty())
      fail(EG_ERR_INVALID_ARGUMENT,
           key + " '" + path + "' has " + sign +
               " but no vision_config: it is a whole model's config without the vision "
               "tower's sizes (its top-level sizes are the language model's); use the "
               "checkpoint's original config.json, which has a vision_config");
    v = &doc;
  }
  if (!v->is_object())
    fail(EG_ERR_INVALID_ARGUMENT, key + " '" + path + "': vision_config is not an object");
  section_ = *v;
  if (const Json* t = doc.find("model_type"); t && t->is_string()) model_type_ = t->as_string("");
  if (const Json* t = section_.find("model_type"); t && t->is_string())
    vision_model_type_ = t->as_string("");
  if (model_type_.empty()) model_type_ = vision_model_type_;
}

void VisionConfigJson::require_model_type(const std::string& plugin,
                                          std::initializer_list<const char*> accepted) const {
  if (model_type_.empty()) return;  // a bare vision config need not say
  std::string list;
  for (const char* a : accepted) {
    if (model_type_ == a || vision_model_type_ == a) return;
    list += std::string(list.empty() ? "'" : ", '") + a + "'";
  }
  fail(EG_ERR_INVALID_ARGUMENT, plugin + ": config.json '" + path_ + "' has model_type '" +
                                    model_type_ + "', not a checkpoint this plugin reads (" + list +
                                    "): name the right checkpoint folder or pick the plugin "
                                    "that matches this model");
}

void VisionConfigJson::read_int(const char* key, int64_t& dst) const {
  if (const Json* j = find(key)) dst = j->as_int(where_ + key);
}

CheckpointFolder checkpoint_folder(const char* weights) {
  CheckpointFolder f;
  if (!weights || !*weights || std::string(weights) == "random") return f;
  const std::filesystem::path dir(weights);
  if (file_kind(dir) != FileKind::Directory) return f;
  f.dir = dir.string();
  f.config = folder_file(dir, "config.json");
  f.preprocessor = folder_file(dir, "preprocessor_config.json");
  f.video_preprocessor = folder_file(dir, "video_preprocessor_config.json");
  return f;
}

void require_folder_config(const CheckpointFolder& folder, const encgraph::sdk::Config& config,
                           std::initializer_list<const char*> size_keys) {
  if (folder.dir.empty() || !folder.config.empty() || config.has("config_json")) return;
  std::string missing;
  for (const char* key : size_keys)
    if (!config.has(key)) missing += (missing.empty() ? "" : ", ") + std::string(key);
  if (missing.empty()) return;
  fail(EG_ERR_INVALID_ARGUMENT,
       config.plugin() + ": plugin.weights folder '" + folder.dir +
           "' has no config.json, so nothing gives the tower's sizes (" + missing +
           " would come from the plugin's defaults, which may not be this checkpoint's): put "
           "the checkpoint's config.json in the folder, name one with [plugin.config] "
           "config_json, or set every size key");
}

PreprocessorJson::PreprocessorJson(const std::string& path, const std::string& plugin)
    : path_(path), plugin_(plugin), where_("preprocessor_config '" + path + "' ") {
  // preprocessor_config.json or video_preprocessor_config.json: name the one read.
  const std::string name = std::filesystem::path(path).filename().string();
  const std::string key = plugin + ": " + name;
  const std::string text =
      read_text_input(path, key, "fix or remove the checkpoint folder's " + name);
  doc_ = Json::parse(text, key + " '" + path + "'");
  if (!doc_.is_object())
    fail(EG_ERR_INVALID_ARGUMENT, key + " '" + path + "' is not a JSON object");
  require_ordered_pixels(*this, plugin);
}

const Json* PreprocessorJson::find(const char* key, const char* sub) const {
  const Json* j = doc_.find(key);
  if (!j || !sub) return j;
  return j->is_object() ? j->find(sub) : nullptr;
}

bool PreprocessorJson::read_int(const char* key, int64_t& dst, const char* sub) const {
  const Json* j = find(key, sub);
  if (!j || j->is_null()) return false;
  dst = j->as_int(where_ + key + (sub ? std::string(".") + sub : std::string()));
  return true;
}

void PreprocessorJson::require_floats(const std::string& plugin, const char* key,
                                      const std::vector<double>& expected) const {
  const Json* j = find(key);
  if (!j || j->is_null()) return;
  const std::string what = where_ + key;
  std::vector<double> got;
  if (j->is_number()) {
    got.assign(expected.size(), j->as_double(what));  // one value for every channel
  } else {
    for (const Json& e : j->as_array(what)) got.push_back(e.as_double(what + " entry"));
  }
  // A value no normalisation can have is a bad file (exit code 2), unlike a
  // valid one this plugin does not implement (unsupported, below): pixels are
  // scaled to [0, 1] first, so a mean lies there and a std is positive.
  const bool is_std = std::string(key).find("std") != std::string::npos;
  for (size_t i = 0; i < got.size(); ++i) {
    const double v = got[i];
    const bool valid = std::isfinite(v) && (is_std ? v > 0.0 : v >= 0.0 && v <= 1.0);
    if (!valid)
      fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + what + " entry " + std::to_string(i) + " is " +
                                        format_double(v) +
                                        (is_std ? ": a standard deviation must be positive"
                                                : ": a mean of pixels scaled to [0, 1] lies in "
                                                  "[0, 1]") +
                                        "; fix the file (the released file has the values this "
                                        "plugin normalises with)");
  }
  bool same = got.size() == expected.size();
  for (size_t i = 0; same && i < got.size(); ++i) same = std::fabs(got[i] - expected[i]) <= 1e-6;
  if (same) return;
  std::string want;
  for (double v : expected) want += (want.empty() ? "" : ", ") + format_double(v);
  fail(EG_ERR_UNSUPPORTED, plugin + ": " + what + " is not [" + want +
                               "], the values this plugin normalises with; it supports only "
                               "the released processor's " +
                               key);
}

void require_agree(const std::string& plugin, const std::string& file_what, int64_t file_value,
                   const std::string& other_what, int64_t other_value) {
  if (file_value == other_value) return;
  fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + other_what + " = " + std::to_string(other_value) +
                                    " contradicts " + file_what + " = " +
                                    std::to_string(file_value) +
                                    ": they must agree (remove the key, or use the config and "
                                    "preprocessor files of one checkpoint)");
}

}  // namespace encoder_kit
