#include <encoder_kit/config_source.hpp>

namespace encoder_kit {

ConfigSource config_source(encgraph::sdk::Config& config, const char* weights,
                           std::initializer_list<const char*> size_keys) {
  ConfigSource s;
  s.folder = checkpoint_folder(weights);
  require_folder_config(s.folder, config, size_keys);
  const auto named = config.get_optional<std::string>("config_json");
  const bool folder_config = !named && !s.folder.config.empty();
  s.has_config = named || folder_config;
  s.config_path = named ? *named : s.folder.config;
  if (folder_config) s.folder_config = s.folder.config;
  return s;
}

}  // namespace encoder_kit
