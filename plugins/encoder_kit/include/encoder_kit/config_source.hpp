// Where a plugin's tower sizes come from: the `config_json` key, else the
// config.json of the checkpoint folder that `plugin.weights` names. One rule
// for every plugin: a named file overrides the folder's, and only the folder's
// own config.json binds the size keys (the weights beside it have its sizes).
#pragma once

#include <encoder_kit/config_json.hpp>

#include <initializer_list>
#include <string>

namespace encoder_kit {

struct ConfigSource {
  CheckpointFolder folder;    // what `weights` brings beside the weights
  bool has_config = false;    // a config file is to be read: config_path
  std::string config_path;    // config_json's value, else folder.config ("" when neither)
  std::string folder_config;  // folder.config when it is the file read, else "": CheckpointKeys'
};

// Runs require_folder_config(folder, config, size_keys), then reads the
// `config_json` key. Throws what those throw.
ConfigSource config_source(encgraph::sdk::Config& config, const char* weights,
                           std::initializer_list<const char*> size_keys);

}  // namespace encoder_kit
