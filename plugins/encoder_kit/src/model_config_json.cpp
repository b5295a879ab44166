#include <encoder_kit/error.hpp>
#include <encoder_kit/input_file.hpp>
#include <encoder_kit/model_config_json.hpp>

namespace encoder_kit {

ModelConfigJson::ModelConfigJson(const std::string& path, const std::string& plugin)
    : at_(plugin + ": config_json '" + path + "' ") {
  const std::string text =
      read_text_input(path, "config_json", "point config_json at the checkpoint's config.json");
  top_ = Json::parse(text, plugin + ": config_json '" + path + "'");
}

void ModelConfigJson::read_feature_layer(int64_t& dst) const {
  const Json* j = top_.find("vision_feature_layer");
  if (!j) return;
  if (j->is_array())
    fail(EG_ERR_UNSUPPORTED, at_ + "vision_feature_layer is a list; one layer only");
  dst = j->as_int(at_ + "vision_feature_layer");
}

void ModelConfigJson::read_text_hidden_size(int64_t& dst) const {
  if (const Json* t = top_.find("text_config"))
    if (const Json* h = t->find("hidden_size")) dst = h->as_int(at_ + "text_config.hidden_size");
}

void ModelConfigJson::require_string(const char* key, const std::string& expected,
                                     const std::string& why) const {
  if (const Json* j = top_.find(key); j && j->as_string(at_ + key) != expected)
    fail(EG_ERR_UNSUPPORTED, at_ + key + " must be \"" + expected + "\"" + why);
}

void require_feature_layer(const std::string& plugin, int64_t layer, int64_t num_layers) {
  if (layer < -(num_layers + 1) || layer > num_layers)
    fail(EG_ERR_INVALID_ARGUMENT,
         plugin + ": vision_feature_layer " + std::to_string(layer) + " is outside [-" +
             std::to_string(num_layers + 1) + ", " + std::to_string(num_layers) +
             "] (hidden_states has the embeddings plus one entry per layer)");
}

}  // namespace encoder_kit
