// Reading the `config_json` key of a model plugin: the `vision_config` object of
// a Hugging Face config.json, or the whole file when it is a bare vision config.
// Errors name the file and the key, so a bad checkpoint config is easy to find.
#pragma once

#include <encoder_kit/config.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace encoder_kit {

class VisionConfigJson {
 public:
  // Throws Error(INVALID_ARGUMENT) naming "<plugin>: [plugin.config]
  // config_json" and the file when it is missing, not a regular file, over
  // kMaxJsonInputBytes, not JSON, or its vision_config is no object, or when
  // it is a whole model's config (a language model's keys: vocab_size,
  // text_config, a ...ForConditionalGeneration architecture) without a
  // vision_config: its top-level sizes are the language model's.
  VisionConfigJson(const std::string& path, const std::string& plugin);

  const std::string& path() const { return path_; }
  // "config_json '<path>' vision_config.": what errors put before a key.
  const std::string& where() const { return where_; }
  // The key's value in vision_config, or nullptr.
  const Json* find(const char* key) const { return section_.find(key); }
  // Sets dst to the key's integer; leaves it when the key is absent.
  void read_int(const char* key, int64_t& dst) const;
  // The file's model_type (top level; else vision_config's), or "" when absent.
  const std::string& model_type() const { return model_type_; }
  // Throws Error(INVALID_ARGUMENT) naming the file when its top-level or
  // vision_config model_type is set and in neither case one of `accepted`.
  void require_model_type(const std::string& plugin,
                          std::initializer_list<const char*> accepted) const;

 private:
  std::string path_;
  std::string where_;
  Json section_;
  std::string model_type_;
  std::string vision_model_type_;
};

// ---- checkpoint folders: `plugin.weights = "<folder>"` alone configures the tower

// The files a checkpoint folder holds beside its weights; empty strings when
// `weights` is null, "random", not a directory, or the file is absent.
// Throws Error(INVALID_ARGUMENT) naming the file when one of them is there
// but is not a regular file (a directory, a FIFO, a device, a broken link):
// skipping it would configure the tower from defaults.
struct CheckpointFolder {
  std::string dir;           // the folder, or "" when `weights` is not one
  std::string config;        // <folder>/config.json
  std::string preprocessor;  // <folder>/preprocessor_config.json
  // <folder>/video_preprocessor_config.json (transformers' video processors
  // save their own file; Qwen3-VL's released folders have one)
  std::string video_preprocessor;
};
CheckpointFolder checkpoint_folder(const char* weights);

// A folder without config.json says nothing of the tower's sizes, and the
// plugin's defaults (one released size) would meet weights of another.
// Throws Error(INVALID_ARGUMENT) naming the folder when `folder` is one, has
// no config.json, and `config` has neither config_json nor every key of
// `size_keys` (the sizes config.json would give). Reads no key.
void require_folder_config(const CheckpointFolder& folder, const encgraph::sdk::Config& config,
                           std::initializer_list<const char*> size_keys);

// A Hugging Face preprocessor_config.json (a JSON object). Errors name the file.
class PreprocessorJson {
 public:
  // Throws Error(INVALID_ARGUMENT) naming the file when it is unreadable, not
  // JSON or not an object, or when its bounds contradict each other
  // (min_pixels above max_pixels, size.shortest_edge above size.longest_edge).
  PreprocessorJson(const std::string& path, const std::string& plugin);
  const std::string& path() const { return path_; }
  // "preprocessor_config '<path>' ": what errors put before a key.
  const std::string& where() const { return where_; }
  // `key`, or `key.sub` inside an object (e.g. "size", "shortest_edge"), or nullptr.
  const Json* find(const char* key, const char* sub = nullptr) const;
  // The integer at key (or key.sub), when present.
  bool read_int(const char* key, int64_t& dst, const char* sub = nullptr) const;
  // Throws Error(UNSUPPORTED) naming the file when `key` is present and is not
  // the list `expected` (within 1e-6 each): the plugin's normalisation is fixed.
  void require_floats(const std::string& plugin, const char* key,
                      const std::vector<double>& expected) const;

 private:
  std::string path_;
  std::string plugin_;
  std::string where_;
  Json doc_;
};

// A size the folder's file fixes (file_what: "config.json '<p>' vision_config.depth")
// and a [plugin.config] key that sets it too must agree: throws
// Error(INVALID_ARGUMENT) naming both when they differ.
void require_agree(const std::string& plugin, const std::string& file_what, int64_t file_value,
                   const std::string& other_what, int64_t other_value);

// Runs fn (a weight load); a failure from it gets "(sizes from <config_path>...)"
// appended, so a checkpoint that contradicts its config names the config file.
// config_path empty: fn runs as is.
template <class Fn>
decltype(auto) naming_config_on_failure(const std::string& config_path, Fn&& fn) {
  if (config_path.empty()) return std::forward<Fn>(fn)();
  try {
    return std::forward<Fn>(fn)();
  } catch (const Error& e) {
    fail(e.status(), std::string(e.what()) + " (the tower's sizes come from '" + config_path +
                         "': check that it is this checkpoint's config)");
  }
}

}  // namespace encoder_kit
