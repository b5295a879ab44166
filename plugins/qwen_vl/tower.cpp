#include "tower.hpp"

#include "forward.hpp"
#include "spec.hpp"
#include "work.hpp"

#include <encoder_kit/checked.hpp>
#include <encoder_kit/config_json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace qwen_vl {
namespace {

// Output names under Outputs::Deepstack: the merger's, then one per deepstack
// feature (validate() keeps their count within EG_MAX_OUTPUTS).
constexpr const char* kDeepstackNames[EG_MAX_OUTPUTS] = {
    "pooler_output", "deepstack_0", "deepstack_1", "deepstack_2",
    "deepstack_3",   "deepstack_4", "deepstack_5", "deepstack_6"};

std::string dims(int64_t h, int64_t w) {
  return std::to_string(h) + "x" + std::to_string(w);
}

void describe(const Options& o, sdk::ModelInfo& info) {
  const Spec& s = o.spec();
  const VisionConfig& c = o.model;
  const eg_dtype dtype = o.dtype == Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
  // Budgets and path_tokens count the tower's output rows: merged 2x2 units.
  info.path("default", "merged tokens")
      .max_frames_per_video(static_cast<int32_t>(o.max_frames_per_video));
  const bool deepstack = s.outputs == Outputs::Deepstack;
  for (int64_t k = 0; k <= c.num_deepstack(); ++k)
    info.output(deepstack ? kDeepstackNames[k] : "embeddings", c.out_hidden_size, dtype);
  // The buffers in Buffers' order (layout.hpp).
  const bool windowed = s.attention == Attention::Windowed;
  info.buffer("pixel_rows", dtype);
  if (s.pos_embed != PosEmbed::None)
    info.buffer("pos_index", EG_DTYPE_I32).buffer("pos_weight", EG_DTYPE_F32);
  info.buffer("rope_cos", EG_DTYPE_F32)
      .buffer("rope_sin", EG_DTYPE_F32)
      .buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST);
  if (windowed) info.buffer("cu_window_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST);
  info.buffer(windowed ? "inverse_window_index" : "token_index", EG_DTYPE_I32);
}

// `values` into buffer `b`'s staging, as its leading rows.
void put(sdk::StagingSet& buffers, int32_t b, const std::vector<int32_t>& values) {
  buffers.get<int32_t>(b).append(values.data(), static_cast<int64_t>(values.size()));
}

}  // namespace

Tower::Tower(const Spec& spec, sdk::CreateArgs& args)
    : opt_(parse_options(spec, args.config, args.raw)), buffers_(spec) {
  const VisionConfig& c = opt_.model;
  if (args.device() == EG_DEVICE_CUDA) require_cuda_forward(spec);
  const encoder_kit::WeightSource source(args.weights().value_or("random"), opt_.seed,
                                         opt_.check_finite);
  Weights w = encoder_kit::naming_config_on_failure(opt_.config_path,
                                                    [&] { return load_weights(c, source); });
  sdk::host().info("loaded " + source.description() +
                   (source.is_random() ? std::string() : " (tensors under '" + w.prefix + "')") +
                   " (depth " + std::to_string(c.depth) + ", hidden " +
                   std::to_string(c.hidden_size) + ", out_hidden " +
                   std::to_string(c.out_hidden_size) +
                   (spec.outputs == Outputs::Deepstack
                        ? ", " + std::to_string(c.num_deepstack()) + " deepstack outputs)"
                        : std::string(")")));
  if (args.device() == EG_DEVICE_CUDA)
    cuda_ = make_cuda_model(opt_, w, args.device_index(),
                            [](const std::string& message) { sdk::host().warn(message); });
  else
    cpu_weights_ = std::move(w);
  describe(opt_, info_);
}

Tower::~Tower() = default;

Grid Tower::checked_grid(const eg_item_desc& d) const {
  const Spec& s = opt_.spec();
  const std::string who = s.name;
  if (d.height <= 0 || d.width <= 0 || d.frames <= 0)
    sdk::invalid(who + ": item geometry must be positive, got " + dims(d.height, d.width) + "x" +
                 std::to_string(d.frames));
  if (d.modality == EG_MODALITY_IMAGE && d.frames != 1)
    sdk::invalid(who + ": an image has exactly one frame, got " + std::to_string(d.frames));
  if (d.modality != EG_MODALITY_IMAGE && d.modality != EG_MODALITY_VIDEO)
    sdk::invalid(who + ": unknown modality " + std::to_string(d.modality));
  if (d.frames > opt_.max_frames_per_video)
    sdk::invalid(
        who + ": video of " + std::to_string(d.frames) +
        " frames exceeds max_frames_per_video = " + std::to_string(opt_.max_frames_per_video));
  if (d.height > kMaxSide || d.width > kMaxSide)
    sdk::invalid(who + ": item of " + dims(d.height, d.width) + " has a side over " +
                 std::to_string(kMaxSide) + " pixels");
  const bool all_frames = s.video_pixels == VideoPixels::AllFrames;
  const Grid g = grid_for(opt_, d.modality == EG_MODALITY_VIDEO, d.height, d.width, d.frames);
  // Patch values of the item (patches x patch_dim), bounded so that its
  // arrays and the int32 offsets of its sequences stay sound.
  const int64_t values = encoder_kit::checked_product({g.t, g.h, g.w, opt_.model.patch_dim()},
                                                      who + ": the item's patch values");
  if (values > kMaxItemValues)
    sdk::invalid(who + ": item of " + dims(d.height, d.width) + " x " + std::to_string(d.frames) +
                 " frames needs " + std::to_string(values) +
                 " patch values, over the plugin's limit of " + std::to_string(kMaxItemValues) +
                 (all_frames ? ": lower max_pixels, video_max_pixels or max_frames_per_video"
                             : ": lower max_pixels or max_frames_per_video"));
  const int64_t factor = opt_.model.resize_factor(), unit_pixels = factor * factor;
  const int64_t frame_pixels = g.h * g.w / opt_.model.merge_unit() * unit_pixels;
  if (frame_pixels / unit_pixels > max_frame_units(opt_))
    sdk::invalid(who + ": the processor's resize gives this " + dims(d.height, d.width) + " item " +
                 std::to_string(frame_pixels) + " pixels per frame, above " +
                 (all_frames
                      ? "what max_pixels / video_max_pixels allow: the resize keeps "
                      : "max_pixels = " + std::to_string(opt_.max_pixels) + ": the resize keeps ") +
                 "each side a multiple of " + std::to_string(factor) +
                 " and never below it, so a very thin item (or min_pixels close to max_pixels) "
                 "can exceed " +
                 (all_frames ? "the bound; raise max_pixels (video_max_pixels for videos) to at "
                               "least "
                             : "max_pixels; raise it to at least ") +
                 std::to_string(frame_pixels) + " to accept it");
  return g;
}

sdk::ItemSpec Tower::spec_of(const Grid& g, int64_t frames) const {
  const int64_t tokens = g.patches() / opt_.model.merge_unit();
  // input_size: the forward's FLOPs in patch-equivalents (attention's
  // quadratic term included), what data-parallel ranks are balanced on.
  return {item_work(opt_.model, g), tokens, frames, {tokens}};  // the path's unit: merged tokens
}

Tower::Item Tower::item_create(const eg_item_desc& d) const {
  const Grid g = checked_grid(d);
  const bool video = d.modality == EG_MODALITY_VIDEO;
  // The channel count matters only for pixels (checked while reading them).
  const std::vector<float> rows = d.pixels ? patch_rows_from_pixels(opt_, video, d.pixels, d.frames,
                                                                    d.height, d.width, d.channels)
                                           : synthetic_patch_rows(opt_.model, g, d.seed);
  return make_item_data(opt_, g, d.frames, rows);
}

sdk::ItemSpec Tower::item_spec(const Item& it) const {
  return spec_of(it.grid, it.frames);
}

sdk::ItemSpec Tower::item_spec_for_desc(const eg_item_desc& d) const {
  return spec_of(checked_grid(d), d.frames);
}

sdk::Shape Tower::buffer_shape(const eg_graph_shape& s, int32_t b) const {
  const VisionConfig& c = opt_.model;
  const Capacity cap = capacity_for(opt_, s);
  if (b == buffers_.pixel_rows) return {cap.patches, c.patch_dim()};
  if (b == buffers_.pos_index || b == buffers_.pos_weight)
    return {cap.patches, pos_taps(opt_.spec())};
  if (b == buffers_.rope_cos || b == buffers_.rope_sin) return {cap.patches, c.head_dim() / 2};
  if (b == buffers_.cu_seqlens) return {cap.frames + 1};
  if (b == buffers_.cu_window_seqlens) return {cap.windows + 1};
  return {cap.tokens};  // token_index (the SDK checked the index)
}

sdk::Shape Tower::output_shape(const eg_graph_shape& s, int32_t) const {
  return {capacity_for(opt_, s).tokens, opt_.model.out_hidden_size};
}

size_t Tower::workspace_size(const eg_graph_shape& s) const {
  const Capacity cap = capacity_for(opt_, s);
  return cuda_ ? cuda_->workspace_bytes(cap) : cpu_workspace_bytes(opt_.model, cap);
}

// Host staging, copied and padded by the runtime: zero pixel, weight and
// rotary rows (rows -1) keep every value finite; the sequence tables decide
// how much work the warm-up does.
void Tower::prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
  const CaptureTables t = capture_tables(opt_.model, capacity_for(opt_, s));
  put(buffers, buffers_.cu_seqlens, t.cu_seqlens);
  if (buffers_.cu_window_seqlens >= 0) put(buffers, buffers_.cu_window_seqlens, t.cu_windows);
  put(buffers, buffers_.token_index, t.token_index);
}

void Tower::prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                                   sdk::StagingSet& buffers) {
  const Buffers& b = buffers_;
  // Typed views of the version's buffers (none for one it lacks).
  auto view = [&](auto type, int32_t i) {
    using T = decltype(type);
    return i >= 0 ? std::optional<sdk::Staging<T>>(buffers.get<T>(i)) : std::nullopt;
  };
  auto data = [](auto& v) { return v ? v->data() : nullptr; };
  auto set_rows = [](auto& v, int64_t n) { return v ? v->set_rows(n) : void(); };
  const bool f32 = opt_.dtype == Dtype::F32;
  auto pixels_f32 = view(float{}, f32 ? b.pixel_rows : -1);
  auto pixels_bf16 = view(uint16_t{}, f32 ? -1 : b.pixel_rows);
  auto pos_index = view(int32_t{}, b.pos_index);
  auto pos_weight = view(float{}, b.pos_weight);
  auto cos = view(float{}, b.rope_cos), sin = view(float{}, b.rope_sin);
  auto cu_seqlens = view(int32_t{}, b.cu_seqlens),
       cu_windows = view(int32_t{}, b.cu_window_seqlens);
  auto token_index = view(int32_t{}, b.token_index);
  const StagingTarget t{f32 ? static_cast<void*>(data(pixels_f32)) : data(pixels_bf16),
                        data(cos),
                        data(sin),
                        data(cu_seqlens),
                        data(cu_windows),
                        data(token_index),
                        capacity_for(opt_, s),
                        data(pos_index),
                        data(pos_weight)};
  std::vector<const ItemData*> batch;
  for (const ItemData& it : items) batch.push_back(&it);
  const StagedRows rows = stage_batch(opt_, batch, t);
  for (auto* v : {&pixels_f32, &pos_weight, &cos, &sin}) set_rows(*v, rows.patches);
  set_rows(pixels_bf16, rows.patches);
  set_rows(pos_index, rows.patches);
  set_rows(cu_seqlens, rows.frame_rows);
  set_rows(cu_windows, rows.window_rows);
  set_rows(token_index, rows.tokens);
}

void Tower::run(const sdk::ForwardArgs& a, bool tune) {
  const eg_forward_args& raw = a.raw();
  if (raw.num_buffers != buffers_.count)
    sdk::invalid(std::string(opt_.spec().name) + ": expected " + std::to_string(buffers_.count) +
                 " buffers, got " + std::to_string(raw.num_buffers));
  const Capacity cap = capacity_for(opt_, a.shape());
  // Every declared output: bf16 on CUDA, f32 on the CPU.
  std::vector<void*> bf16;
  std::vector<float*> f32;
  for (int32_t k = 0; k < info_.raw().num_outputs; ++k) {
    if (cuda_)
      bf16.push_back(a.output<uint16_t>(k).data());
    else
      f32.push_back(a.output<float>(k).data());
  }
  if (cuda_)
    cuda_->forward(cap, raw.buffers, bf16.data(), static_cast<int>(bf16.size()), a.workspace(),
                   a.workspace_size(), a.stream(), tune);
  else
    cpu_forward(opt_.model, cpu_weights_, cap, raw.buffers, f32.data(), a.workspace(),
                a.workspace_size());
}

}  // namespace qwen_vl
