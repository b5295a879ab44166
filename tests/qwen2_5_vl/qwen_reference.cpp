#include "qwen_reference.hpp"

#include "../qwen_family_reference.hpp"

#include <encoder_kit/safetensors.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace qwen_ref {
namespace {

using ref64::linear;
using ref64::Mat;

Mat rms_norm(const Mat& x, int64_t n, int64_t d, const Mat& w) {
  return ref64::rms_norm(x, n, d, w, 1e-6);
}

std::vector<int64_t> shape_of(const Config& c, const std::string& name) {
  const int64_t d = c.hidden, md = 4 * c.hidden;
  auto ends = [&](const char* s) {
    return name.size() >= std::string(s).size() &&
           name.compare(name.size() - std::string(s).size(), std::string::npos, s) == 0;
  };
  if (name == "visual.patch_embed.proj.weight") return {d, 3, c.temporal, c.patch, c.patch};
  if (name == "visual.merger.ln_q.weight") return {d};
  if (name == "visual.merger.mlp.0.weight") return {md, md};
  if (name == "visual.merger.mlp.0.bias") return {md};
  if (name == "visual.merger.mlp.2.weight") return {c.out, md};
  if (name == "visual.merger.mlp.2.bias") return {c.out};
  if (ends("norm1.weight") || ends("norm2.weight")) return {d};
  if (ends("attn.qkv.weight")) return {3 * d, d};
  if (ends("attn.qkv.bias")) return {3 * d};
  if (ends("attn.proj.weight")) return {d, d};
  if (ends("attn.proj.bias")) return {d};
  if (ends("gate_proj.weight") || ends("up_proj.weight")) return {c.inter, d};
  if (ends("gate_proj.bias") || ends("up_proj.bias")) return {c.inter};
  if (ends("down_proj.weight")) return {d, c.inter};
  if (ends("down_proj.bias")) return {d};
  return {};
}

std::vector<std::string> names(const Config& c) {
  std::vector<std::string> n = {"visual.patch_embed.proj.weight"};
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "visual.blocks." + std::to_string(i) + ".";
    for (const char* s :
         {"norm1.weight", "norm2.weight", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
          "attn.proj.bias", "mlp.gate_proj.weight", "mlp.gate_proj.bias", "mlp.up_proj.weight",
          "mlp.up_proj.bias", "mlp.down_proj.weight", "mlp.down_proj.bias"})
      n.push_back(p + s);
  }
  for (const char* s :
       {"visual.merger.ln_q.weight", "visual.merger.mlp.0.weight", "visual.merger.mlp.0.bias",
        "visual.merger.mlp.2.weight", "visual.merger.mlp.2.bias"})
    n.push_back(s);
  return n;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c) {
  std::string full = "[";
  for (size_t i = 0; i < c.fullatt.size(); ++i)
    full += (i ? ", " : "") + std::to_string(c.fullatt[i]);
  full += "]";
  return {{"depth", std::to_string(c.depth)},
          {"hidden_size", std::to_string(c.hidden)},
          {"num_heads", std::to_string(c.heads)},
          {"intermediate_size", std::to_string(c.inter)},
          {"out_hidden_size", std::to_string(c.out)},
          {"patch_size", std::to_string(c.patch)},
          {"temporal_patch_size", std::to_string(c.temporal)},
          {"spatial_merge_size", std::to_string(c.merge)},
          {"window_size", std::to_string(c.window)},
          {"fullatt_block_indexes", full}};
}

Params random_params(const Config& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Params p;
  for (const std::string& n : names(c)) {
    const auto shape = shape_of(c, n);
    int64_t count = 1, fan_in = 1;
    for (int64_t d : shape) count *= d;
    if (shape.size() >= 2) fan_in = count / shape[0];
    const bool norm = n.find("norm") != std::string::npos || n.find("ln_q") != std::string::npos;
    const bool bias = n.size() > 4 && n.compare(n.size() - 4, 4, "bias") == 0;
    std::normal_distribution<double> dist(norm ? 1.0 : 0.0, norm ? 0.2
                                                            : bias
                                                                ? 0.1
                                                                : 1.0 / std::sqrt(double(fan_in)));
    Mat v(static_cast<size_t>(count));
    for (double& x : v) x = static_cast<double>(static_cast<float>(dist(rng)));
    p[n] = std::move(v);
  }
  return p;
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& name_prefix) {
  std::vector<encoder_kit::TensorToWrite> out;
  for (const auto& [name, v] : p)
    out.push_back(encoder_kit::f32_tensor(name_prefix + name, shape_of(c, name),
                                          std::vector<float>(v.begin(), v.end())));
  encoder_kit::write_safetensors(file, out);
}

std::vector<uint8_t> random_pixels(int64_t frames, int64_t height, int64_t width, uint64_t seed) {
  return ref64::random_pixels(frames * height, width, 3, seed);
}

Input preprocess(const Config& c, const std::vector<uint8_t>& pixels, int64_t frames,
                 int64_t height, int64_t width) {
  const double mean[3] = {0.48145466, 0.4578275, 0.40821073};
  const double stdv[3] = {0.26862954, 0.26130258, 0.27577711};
  const int64_t tp = c.temporal, p = c.patch;
  const int64_t padded = (frames + tp - 1) / tp * tp;
  return Input{
      padded / tp, height / p, width / p,
      qwen_family_ref::patch_rows(pixels, frames, height, width, tp, p, c.merge, mean, stdv)};
}

std::vector<std::vector<double>> forward(const Config& c, const Params& P,
                                         const std::vector<Input>& items) {
  const int64_t d = c.hidden, hd = c.head_dim(), unit = c.merge * c.merge;
  // Concatenate the items (pixel_values as the model receives them).
  Mat rows;
  int64_t n = 0;
  for (const Input& it : items) {
    rows.insert(rows.end(), it.rows.begin(), it.rows.end());
    n += it.t * it.h * it.w;
  }
  // Patch embedding: Conv3d, kernel == stride, on the patch's (c, t, y, x) values.
  Mat x = linear(rows, n, c.patch_dim(), P.at("visual.patch_embed.proj.weight"), nullptr, d);

  // rot_pos_emb: (h, w) positions per patch in the processor's order.
  std::vector<std::pair<int64_t, int64_t>> pos;
  for (const Input& it : items)
    for (int64_t t = 0; t < it.t; ++t)
      for (int64_t bh = 0; bh < it.h / c.merge; ++bh)
        for (int64_t bw = 0; bw < it.w / c.merge; ++bw)
          for (int64_t mh = 0; mh < c.merge; ++mh)
            for (int64_t mw = 0; mw < c.merge; ++mw)
              pos.push_back({bh * c.merge + mh, bw * c.merge + mw});
  // Qwen2_5_VisionRotaryEmbedding(head_dim // 2), as cat(rpe, rpe) [n, hd].
  Mat angles = qwen_family_ref::rotary_angles(pos, hd);

  // get_window_index
  std::vector<int64_t> window_index;
  std::vector<int64_t> cu_window = {0};
  const int64_t vws = c.window / c.merge / c.patch;
  int64_t id_base = 0;
  for (const Input& it : items) {
    const int64_t lh = it.h / c.merge, lw = it.w / c.merge;
    const int64_t pad_h = vws - lh % vws, pad_w = vws - lw % vws;
    const int64_t nwh = (lh + pad_h) / vws, nww = (lw + pad_w) / vws;
    for (int64_t t = 0; t < it.t; ++t)
      for (int64_t wy = 0; wy < nwh; ++wy)
        for (int64_t wx = 0; wx < nww; ++wx) {
          int64_t count = 0;
          for (int64_t y = wy * vws; y < (wy + 1) * vws; ++y)
            for (int64_t xx = wx * vws; xx < (wx + 1) * vws; ++xx) {
              const bool inside = y < lh && xx < lw;  // else the -100 padding
              if (!inside) continue;
              window_index.push_back(id_base + t * lh * lw + y * lw + xx);
              ++count;
            }
          cu_window.push_back(cu_window.back() + count * unit);
        }
    id_base += it.t * lh * lw;
  }
  cu_window.erase(std::unique(cu_window.begin(), cu_window.end()), cu_window.end());
  std::vector<int64_t> cu_full = {0};
  for (const Input& it : items)
    for (int64_t t = 0; t < it.t; ++t) cu_full.push_back(cu_full.back() + it.h * it.w);

  // Reorder hidden states and rotary angles by window, unit (4 patches) at a time.
  auto reorder = [&](const Mat& src, int64_t cols) {
    Mat dst;
    dst.reserve(src.size());
    for (int64_t u : window_index)
      dst.insert(dst.end(), src.begin() + u * unit * cols, src.begin() + (u + 1) * unit * cols);
    return dst;
  };
  x = reorder(x, d);
  angles = reorder(angles, hd);

  for (int64_t blk = 0; blk < c.depth; ++blk) {
    const std::string pre = "visual.blocks." + std::to_string(blk) + ".";
    const bool full = std::find(c.fullatt.begin(), c.fullatt.end(), blk) != c.fullatt.end();
    const std::vector<int64_t>& cu = full ? cu_full : cu_window;
    Mat h = rms_norm(x, n, d, P.at(pre + "norm1.weight"));
    Mat qkv = linear(h, n, d, P.at(pre + "attn.qkv.weight"), &P.at(pre + "attn.qkv.bias"), 3 * d);
    // qkv.reshape(seq, 3, heads, head_dim); rotary on q and k.
    qwen_family_ref::apply_rotary(qkv, n, d, c.heads, angles);
    const Mat attn = qwen_family_ref::segment_attention(qkv, n, d, c.heads, cu);
    Mat proj = linear(attn, n, d, P.at(pre + "attn.proj.weight"), &P.at(pre + "attn.proj.bias"), d);
    for (size_t k = 0; k < x.size(); ++k) x[k] += proj[k];
    h = rms_norm(x, n, d, P.at(pre + "norm2.weight"));
    Mat gate = linear(h, n, d, P.at(pre + "mlp.gate_proj.weight"),
                      &P.at(pre + "mlp.gate_proj.bias"), c.inter);
    Mat up =
        linear(h, n, d, P.at(pre + "mlp.up_proj.weight"), &P.at(pre + "mlp.up_proj.bias"), c.inter);
    for (size_t k = 0; k < gate.size(); ++k) gate[k] = gate[k] / (1.0 + std::exp(-gate[k])) * up[k];
    Mat down = linear(gate, n, c.inter, P.at(pre + "mlp.down_proj.weight"),
                      &P.at(pre + "mlp.down_proj.bias"), d);
    for (size_t k = 0; k < x.size(); ++k) x[k] += down[k];
  }

  // Merger: ln_q, view(-1, 4d), Linear, GELU (erf), Linear.
  const int64_t md = unit * d, tokens = n / unit;
  Mat h = rms_norm(x, n, d, P.at("visual.merger.ln_q.weight"));
  Mat h1 = linear(h, tokens, md, P.at("visual.merger.mlp.0.weight"),
                  &P.at("visual.merger.mlp.0.bias"), md);
  for (double& v : h1) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  Mat merged = linear(h1, tokens, md, P.at("visual.merger.mlp.2.weight"),
                      &P.at("visual.merger.mlp.2.bias"), c.out);

  // reverse_indices = argsort(window_index)
  std::vector<int64_t> reverse(window_index.size());
  std::iota(reverse.begin(), reverse.end(), 0);
  std::sort(reverse.begin(), reverse.end(),
            [&](int64_t a, int64_t b) { return window_index[a] < window_index[b]; });
  std::vector<std::vector<double>> out;
  int64_t token = 0;
  for (const Input& it : items) {
    const int64_t count = it.t * it.h * it.w / unit;
    std::vector<double> rowsout;
    for (int64_t k = 0; k < count; ++k, ++token)
      rowsout.insert(rowsout.end(), merged.begin() + reverse[token] * c.out,
                     merged.begin() + (reverse[token] + 1) * c.out);
    out.push_back(std::move(rowsout));
  }
  return out;
}

}  // namespace qwen_ref
