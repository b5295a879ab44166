#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/input_file.hpp>

#include <cmath>
#include <filesystem>
#include <system_error>

namespace encoder_kit {

VisionConfigJson::VisionConfigJson(const std::string& path, const std::string& plugin)
    : path_(path), where_("config_json '" + path + "' vision_config.") {
  const std::string key = plugin + ": [plugin.config] config_json";
  const std::string text =
      read_text_input(path, key, "name a model's config.json (or a bare vision config)");
  Json doc = Json::parse(text, key + " '" + path + "'");
  if (!doc.is_object()) fail(EG_ERR_INVALID_ARGUMENT, key + " '" + path + "' is not a JSON object");
  const Json* v = doc.find("vision_config");
  if (!v) v = &doc;
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
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(weights);
  if (!fs::is_directory(dir, ec)) return f;
  // Only regular files count; anything else there is read (and named) by the
  // readers below only when the user names it through a key.
  if (fs::is_regular_file(dir / "config.json", ec)) f.config = (dir / "config.json").string();
  if (fs::is_regular_file(dir / "preprocessor_config.json", ec))
    f.preprocessor = (dir / "preprocessor_config.json").string();
  if (fs::is_regular_file(dir / "video_preprocessor_config.json", ec))
    f.video_preprocessor = (dir / "video_preprocessor_config.json").string();
  return f;
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
  bool same = got.size() == expected.size();
  for (size_t i = 0; same && i < got.size(); ++i) same = std::fabs(got[i] - expected[i]) <= 1e-6;
  if (same) return;
  std::string want;
  for (double v : expected) want += (want.empty() ? "" : ", ") + std::to_string(v);
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

void FolderKeys::dim(const char* key, int64_t& value) const {
  const int64_t set = reader_.get_int(key, value);
  if (!folder_config_.empty() && reader_.has(key))
    require_agree(plugin_, "config.json '" + folder_config_ + "' vision_config." + key, value,
                  std::string("[plugin.config] ") + key, set);
  value = set;
}

void FolderKeys::int_list(const char* key, std::vector<int64_t>& value) const {
  std::vector<int64_t> set = reader_.get_int_list(key, value);
  if (!folder_config_.empty() && set != value)
    fail(EG_ERR_INVALID_ARGUMENT,
         plugin_ + ": [plugin.config] " + key + " contradicts config.json '" + folder_config_ +
             "' vision_config." + key + ": they must agree (remove the key)");
  value = std::move(set);
}

}  // namespace encoder_kit
