#include "folder_config.hpp"

#include "spec.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>

#include <vector>

namespace qwen_vl {
namespace {

using encoder_kit::fail;

// Sets `out` to the integer list at `key`, when present.
void read_int_list(const encoder_kit::VisionConfigJson& v, const char* key,
                   std::vector<int64_t>& out) {
  const encoder_kit::Json* j = v.find(key);
  if (!j) return;
  out.clear();
  for (const encoder_kit::Json& e : j->as_array(v.where() + key))
    out.push_back(e.as_int(std::string(key) + " entry"));
}

// What every processor config of the folder must say: the tower's sizes, and
// the normalisation and resampling the plugin implements.
void check_processor_agrees(const encoder_kit::PreprocessorJson& j, const VisionConfig& m) {
  const Spec& s = *m.spec;
  const std::string vc = "the tower's vision_config.";
  auto agree = [&](const char* key, const char* config_key, int64_t value) {
    int64_t v = value;
    if (j.read_int(key, v))
      encoder_kit::require_agree(s.name, vc + config_key + " (config.json or keys)", value,
                                 j.where() + key, v);
  };
  agree("patch_size", "patch_size", m.patch_size);
  agree("temporal_patch_size", "temporal_patch_size", m.temporal_patch_size);
  agree("merge_size", "spatial_merge_size", m.spatial_merge_size);
  j.require_floats(s.name, "image_mean", {s.image_mean.begin(), s.image_mean.end()});
  j.require_floats(s.name, "image_std", {s.image_std.begin(), s.image_std.end()});
  int64_t resample = 3;  // PIL's BICUBIC, the processor's default
  if (j.read_int("resample", resample) && resample != 3)
    fail(EG_ERR_UNSUPPORTED, std::string(s.name) + ": " + j.where() + "resample is " +
                                 std::to_string(resample) +
                                 "; this plugin resizes bicubic only (PIL resample 3)");
}

}  // namespace

void read_config_json(const std::string& path, VisionConfig& c) {
  const Spec& s = *c.spec;
  const encoder_kit::VisionConfigJson v(path, s.name);
  if (s.model_types[1])
    v.require_model_type(s.name, {s.model_types[0], s.model_types[1]});
  else
    v.require_model_type(s.name, {s.model_types[0]});
  v.read_int("depth", c.depth);
  v.read_int("hidden_size", c.hidden_size);
  v.read_int("num_heads", c.num_heads);
  v.read_int("intermediate_size", c.intermediate_size);
  v.read_int("out_hidden_size", c.out_hidden_size);
  v.read_int("patch_size", c.patch_size);
  v.read_int("temporal_patch_size", c.temporal_patch_size);
  v.read_int("spatial_merge_size", c.spatial_merge_size);
  v.read_int("in_chans", c.in_channels);  // Qwen2.5-VL's released checkpoints' spelling
  v.read_int("in_channels", c.in_channels);
  if (s.attention == Attention::Windowed) {
    v.read_int("window_size", c.window_size);
    read_int_list(v, "fullatt_block_indexes", c.fullatt_block_indexes);
  }
  if (s.pos_embed == PosEmbed::Interpolated)
    v.read_int("num_position_embeddings", c.num_position_embeddings);
  if (s.outputs == Outputs::Deepstack)
    read_int_list(v, "deepstack_visual_indexes", c.deepstack_visual_indexes);
  if (const encoder_kit::Json* j = v.find("hidden_act")) {
    const std::string act = j->as_string("vision_config.hidden_act");
    if (act != s.hidden_act)
      fail(EG_ERR_INVALID_ARGUMENT, v.where() + "hidden_act is '" + act + "'; the " + s.title +
                                        " tower this plugin implements uses '" + s.hidden_act +
                                        "'");
  }
}

void read_processor_configs(const encoder_kit::CheckpointFolder& folder, Options& o) {
  const Spec& s = o.spec();
  if (!folder.preprocessor.empty()) {
    const encoder_kit::PreprocessorJson j(folder.preprocessor, s.name);
    // Older files say min_pixels/max_pixels; newer ones size.shortest_edge/longest_edge.
    j.read_int("size", o.min_pixels, "shortest_edge");
    j.read_int("size", o.max_pixels, "longest_edge");
    j.read_int("min_pixels", o.min_pixels);
    j.read_int("max_pixels", o.max_pixels);
    check_processor_agrees(j, o.model);
  }
  // Qwen3VLVideoProcessor's size bounds all frames of a video together.
  if (s.video_pixels == VideoPixels::AllFrames && !folder.video_preprocessor.empty()) {
    const encoder_kit::PreprocessorJson j(folder.video_preprocessor, s.name);
    j.read_int("size", o.video_min_pixels, "shortest_edge");
    j.read_int("size", o.video_max_pixels, "longest_edge");
    check_processor_agrees(j, o.model);
  }
}

}  // namespace qwen_vl
