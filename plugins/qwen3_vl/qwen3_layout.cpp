#include "qwen3_layout.hpp"

#include <algorithm>
#include <cmath>

namespace qwen3 {

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

void pos_embed_tables(const VisionConfig& c, const Grid& g, int32_t* index, float* weight) {
  const int64_t n = c.pos_grid(), m = c.spatial_merge_size;
  const std::vector<float> hs = linspace_f32(static_cast<float>(n - 1), g.h);
  const std::vector<float> ws = linspace_f32(static_cast<float>(n - 1), g.w);
  int64_t row = 0;
  for (int64_t t = 0; t < g.t; ++t)
    for (int64_t bh = 0; bh < g.h / m; ++bh)
      for (int64_t bw = 0; bw < g.w / m; ++bw)
        for (int64_t mh = 0; mh < m; ++mh)
          for (int64_t mw = 0; mw < m; ++mw, ++row) {
            const float hv = hs[static_cast<size_t>(bh * m + mh)];
            const float wv = ws[static_cast<size_t>(bw * m + mw)];
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
          }
}

void rotary_tables(const VisionConfig& c, const Grid& g, float* cos, float* sin) {
  const int64_t m = c.spatial_merge_size;
  const int64_t half = c.head_dim() / 2, quarter = half / 2;
  std::vector<float> inv_freq(static_cast<size_t>(quarter));
  for (int64_t i = 0; i < quarter; ++i)
    inv_freq[static_cast<size_t>(i)] =
        1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(half));
  int64_t row = 0;
  for (int64_t t = 0; t < g.t; ++t)
    for (int64_t bh = 0; bh < g.h / m; ++bh)
      for (int64_t bw = 0; bw < g.w / m; ++bw)
        for (int64_t mh = 0; mh < m; ++mh)
          for (int64_t mw = 0; mw < m; ++mw, ++row) {
            const float pos[2] = {static_cast<float>(bh * m + mh), static_cast<float>(bw * m + mw)};
            for (int64_t part = 0; part < 2; ++part)
              for (int64_t i = 0; i < quarter; ++i) {
                const float angle = pos[part] * inv_freq[static_cast<size_t>(i)];
                cos[row * half + part * quarter + i] = std::cos(angle);
                sin[row * half + part * quarter + i] = std::sin(angle);
              }
          }
}

int64_t max_frame_units(const Options& o) {
  const int64_t unit_pixels = o.model.resize_factor() * o.model.resize_factor();
  // A video has at least 2 frames (the processor refuses fewer) sharing
  // video_max_pixels; max(factor, ...) keeps at least one unit.
  const int64_t image = o.max_pixels / unit_pixels;
  const int64_t video = o.video_max_pixels / (unit_pixels * o.model.temporal_patch_size);
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
  // Every sequence holds at least one unit (a frame can be that small).
  int64_t sequences = std::min(cap.tokens, items * std::max<int64_t>(max_t, 1));
  // n items of f_i >= 1 frames make sum ceil(f_i / tp) <= (F + n (tp - 1)) / tp
  // sequences, with n <= min(items, F).
  if (const int64_t f = shape.max_frames_per_batch; f > 0)
    sequences = std::min(sequences, (f + std::min(items, f) * (tp - 1)) / tp);
  cap.frames = std::max<int64_t>(1, sequences);
  cap.max_frame_patches = std::min(cap.tokens, max_frame_units(o)) * c.merge_unit();
  return cap;
}

std::vector<SeqBucket> attention_buckets(const Capacity& cap, int64_t merge_units) {
  return encoder_kit::length_buckets(cap.frames, cap.patches, cap.max_frame_patches, merge_units);
}

}  // namespace qwen3
