#include "layout.hpp"

#include "spec.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

namespace qwen_vl {
namespace {

// Calls fn(row, column) in patch rows of `unit_order`: each unit's
// spatial_merge_size^2 patches, row-major inside the unit.
template <class Fn>
void for_each_patch(const VisionConfig& c, const Grid& g, const std::vector<int32_t>& unit_order,
                    Fn fn) {
  const int64_t m = c.spatial_merge_size;
  const int64_t lw = g.w / m, per_frame = (g.h / m) * lw;
  for (int32_t unit : unit_order) {
    const int64_t in_frame = unit % per_frame;
    const int64_t y = in_frame / lw, x = in_frame % lw;
    for (int64_t mh = 0; mh < m; ++mh)
      for (int64_t mw = 0; mw < m; ++mw) fn(y * m + mh, x * m + mw);
  }
}

}  // namespace

WindowLayout window_layout(const VisionConfig& c, const Grid& g) {
  const int64_t m = c.spatial_merge_size;
  const int64_t lh = g.h / m, lw = g.w / m;  // merged units per column / row
  const int64_t per_frame = lh * lw;
  WindowLayout out;
  out.unit_order.resize(static_cast<size_t>(g.t * per_frame));
  if (c.spec->attention == Attention::Full) {
    std::iota(out.unit_order.begin(), out.unit_order.end(), 0);
    out.inverse = out.unit_order;
    return out;
  }
  const int64_t wu = c.window_units();
  out.unit_order.clear();
  for (int64_t t = 0; t < g.t; ++t)
    for (int64_t wy = 0; wy * wu < lh; ++wy)
      for (int64_t wx = 0; wx * wu < lw; ++wx) {
        int32_t units = 0;
        for (int64_t y = wy * wu; y < std::min(lh, (wy + 1) * wu); ++y)
          for (int64_t x = wx * wu; x < std::min(lw, (wx + 1) * wu); ++x, ++units)
            out.unit_order.push_back(static_cast<int32_t>(t * per_frame + y * lw + x));
        out.window_patches.push_back(units * static_cast<int32_t>(c.merge_unit()));
      }
  out.inverse.resize(out.unit_order.size());
  for (size_t k = 0; k < out.unit_order.size(); ++k)
    out.inverse[static_cast<size_t>(out.unit_order[k])] = static_cast<int32_t>(k);
  return out;
}

void rotary_tables(const VisionConfig& c, const Grid& g, const std::vector<int32_t>& unit_order,
                   float* cos, float* sin) {
  const int64_t half = c.head_dim() / 2, quarter = half / 2;
  // The model's rotary module has dim = head_dim / 2 and computes its inverse
  // frequencies (and the angles) in float32.
  std::vector<float> inv_freq(static_cast<size_t>(quarter));
  for (int64_t i = 0; i < quarter; ++i)
    inv_freq[static_cast<size_t>(i)] =
        c.spec->rotary_freq_f64
            ? static_cast<float>(
                  1.0 / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(half)))
            : 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(half));
  // The angles of every position a row or column index takes, computed once:
  // a patch's entries are copies (the same floats as computing them per patch).
  const int64_t positions = std::max(g.h, g.w);
  std::vector<float> cos_of(static_cast<size_t>(positions * quarter));
  std::vector<float> sin_of(cos_of.size());
  for (int64_t pos = 0; pos < positions; ++pos)
    for (int64_t i = 0; i < quarter; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)];
      cos_of[static_cast<size_t>(pos * quarter + i)] = std::cos(angle);
      sin_of[static_cast<size_t>(pos * quarter + i)] = std::sin(angle);
    }
  const size_t part_bytes = static_cast<size_t>(quarter) * sizeof(float);
  int64_t row = 0;
  for_each_patch(c, g, unit_order, [&](int64_t y, int64_t x) {
    const int64_t pos[2] = {y, x};
    for (int64_t part = 0; part < 2; ++part) {
      const size_t from = static_cast<size_t>(pos[part] * quarter);
      std::memcpy(cos + row * half + part * quarter, cos_of.data() + from, part_bytes);
      std::memcpy(sin + row * half + part * quarter, sin_of.data() + from, part_bytes);
    }
    ++row;
  });
}

std::vector<float> linspace_f32(float end, int64_t steps) {
  std::vector<float> v(static_cast<size_t>(steps), 0.0f);
  if (steps <= 1) return v;
  const float step = end / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    v[static_cast<size_t>(i)] =
        i < halfway ? step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
  return v;
}

namespace {

// torch's bicubic convolution weights (A = -0.75) of the 4 taps around a
// sample at fraction t past its floor, in float as grid_sample computes them.
std::array<float, 4> cubic_weights(float t) {
  constexpr float A = -0.75f;
  auto near = [](float x) { return ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f; };
  auto far = [](float x) { return ((A * x - 5.0f * A) * x + 8.0f * A) * x - 4.0f * A; };
  return {far(t + 1.0f), near(t), near(1.0f - t), far(2.0f - t)};
}

// Glm4vVisionEmbeddings: the patch centre (y + 0.5) / h normalised to
// [-1, 1], unnormalised for align_corners = false, then grid_sample's 4 x 4
// bicubic taps, each clamped into the grid (border padding).
void bicubic_tables(const VisionConfig& c, const Grid& g, const std::vector<int32_t>& unit_order,
                    int32_t* index, float* weight) {
  const int64_t n = c.pos_grid();
  const float size = static_cast<float>(n);
  auto source = [&](int64_t coord, int64_t extent) {
    const float normed =
        (static_cast<float>(coord) + 0.5f) / static_cast<float>(extent) * 2.0f - 1.0f;
    return ((normed + 1.0f) * size - 1.0f) / 2.0f;
  };
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v, 0, n - 1); };
  int64_t row = 0;
  for_each_patch(c, g, unit_order, [&](int64_t y, int64_t x) {
    const float sy = source(y, g.h), sx = source(x, g.w);
    const float fy = std::floor(sy), fx = std::floor(sx);
    const std::array<float, 4> wy = cubic_weights(sy - fy), wx = cubic_weights(sx - fx);
    const auto iy = static_cast<int64_t>(fy), ix = static_cast<int64_t>(fx);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        index[row * 16 + i * 4 + j] =
            static_cast<int32_t>(clamp(iy - 1 + i) * n + clamp(ix - 1 + j));
        weight[row * 16 + i * 4 + j] = wy[static_cast<size_t>(i)] * wx[static_cast<size_t>(j)];
      }
    ++row;
  });
}

}  // namespace

int64_t pos_taps(const Spec& s) {
  switch (s.pos_embed) {
    case PosEmbed::Interpolated: return 4;
    case PosEmbed::Bicubic: return 16;
    case PosEmbed::None: break;
  }
  return 0;
}

void pos_embed_tables(const VisionConfig& c, const Grid& g, const std::vector<int32_t>& unit_order,
                      int32_t* index, float* weight) {
  if (c.spec->pos_embed == PosEmbed::Bicubic)
    return bicubic_tables(c, g, unit_order, index, weight);
  const int64_t n = c.pos_grid();
  const std::vector<float> hs = linspace_f32(static_cast<float>(n - 1), g.h);
  const std::vector<float> ws = linspace_f32(static_cast<float>(n - 1), g.w);
  int64_t row = 0;
  for_each_patch(c, g, unit_order, [&](int64_t y, int64_t x) {
    const float hv = hs[static_cast<size_t>(y)], wv = ws[static_cast<size_t>(x)];
    const auto hf = static_cast<int64_t>(hv), wf = static_cast<int64_t>(wv);
    const int64_t hc = std::min(hf + 1, n - 1), wc = std::min(wf + 1, n - 1);
    const float dh = hv - static_cast<float>(hf), dw = wv - static_cast<float>(wf);
    int32_t* ix = index + row * 4;
    float* wt = weight + row * 4;
    ix[0] = static_cast<int32_t>(hf * n + wf);
    ix[1] = static_cast<int32_t>(hf * n + wc);
    ix[2] = static_cast<int32_t>(hc * n + wf);
    ix[3] = static_cast<int32_t>(hc * n + wc);
    wt[0] = (1.0f - dh) * (1.0f - dw);
    wt[1] = (1.0f - dh) * dw;
    wt[2] = dh * (1.0f - dw);
    wt[3] = dh * dw;
    ++row;
  });
}

int64_t min_frame_units(const Options& o) {
  // Under the video processor's rule a video's frames share its pixel bounds:
  // a frame can be a single unit (and so can an image resized by that rule).
  if (o.spec().video_pixels == VideoPixels::AllFrames ||
      o.spec().image_pixels == ImagePixels::AsTemporalPatch)
    return 1;
  // smart_resize's result holds at least min_pixels whenever max_pixels >=
  // 4 * min_pixels (its floor branch loses at most half of each side); below
  // that, only the one unit its max(factor, ...) guarantees.
  const int64_t unit_pixels = o.model.resize_factor() * o.model.resize_factor();
  if (o.max_pixels < 4 * o.min_pixels) return 1;
  return std::max<int64_t>(1, o.min_pixels / unit_pixels);
}

int64_t max_frame_units(const Options& o) {
  const int64_t unit_pixels = o.model.resize_factor() * o.model.resize_factor();
  // ImagePixels::AsTemporalPatch: max_pixels counts the image's copies.
  const int64_t copies =
      o.spec().image_pixels == ImagePixels::AsTemporalPatch ? o.model.temporal_patch_size : 1;
  const int64_t image = o.max_pixels / (unit_pixels * copies);
  // A video has at least temporal_patch_size frames (the processor refuses
  // fewer) sharing video_max_pixels; max(factor, ...) keeps at least one unit.
  const int64_t video = o.spec().video_pixels == VideoPixels::AllFrames
                            ? o.video_max_pixels / (unit_pixels * o.model.temporal_patch_size)
                            : 0;
  return std::max<int64_t>({image, video, 1});
}

Capacity capacity_for(const Options& o, const eg_graph_shape& shape) {
  const VisionConfig& c = o.model;
  Capacity cap;
  cap.tokens = std::max<int64_t>(shape.token_budget, 1);
  cap.patches = cap.tokens * c.merge_unit();
  const int64_t tp = c.temporal_patch_size;
  const int64_t max_t = (o.max_frames_per_video + tp - 1) / tp;
  const int64_t items = std::max<int64_t>(shape.max_batch_size, 1);
  int64_t sequences =
      std::min(cap.tokens / min_frame_units(o), items * std::max<int64_t>(max_t, 1));
  // The packer keeps a batch's decoded frames F within max_frames_per_batch (0:
  // unbounded). n items of f_i >= 1 frames make sum ceil(f_i / tp) <=
  // (F + n (tp - 1)) / tp sequences, with n <= min(items, F).
  if (const int64_t f = shape.max_frames_per_batch; f > 0)
    sequences = std::min(sequences, (f + std::min(items, f) * (tp - 1)) / tp);
  cap.frames = std::max<int64_t>(1, sequences);
  cap.max_frame_patches = std::min(cap.tokens, max_frame_units(o)) * c.merge_unit();
  if (const int64_t side = c.window_units(); side > 0) {
    cap.windows =
        std::max<int64_t>(1, std::min(cap.tokens, (cap.tokens + (side - 1) * cap.frames) / side));
    cap.max_window_patches = std::min(cap.tokens, side * side) * c.merge_unit();
  }
  return cap;
}

std::vector<SeqBucket> full_attention_buckets(const Capacity& cap, int64_t merge_units) {
  return encoder_kit::length_buckets(cap.frames, cap.patches, cap.max_frame_patches, merge_units);
}

}  // namespace qwen_vl
