#include "qwen3_reference.hpp"

#include "../qwen_family_reference.hpp"

#include <algorithm>
#include <cmath>

namespace qwen3_ref {
namespace {

using qwen_family_ref::Mat;
using ref64::gelu_erf;
using ref64::gelu_tanh;

// Every Linear of this tower has a bias.
Mat linear(const Mat& x, int64_t n, int64_t in, const Mat& w, const Mat& b, int64_t out) {
  return ref64::linear(x, n, in, w, &b, out);
}

Mat layer_norm(const Mat& x, int64_t n, int64_t d, const Mat& w, const Mat& b) {
  return ref64::layer_norm(x, n, d, w, b, 1e-6);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> shapes(const Config& c) {
  const int64_t d = c.hidden, md = 4 * c.hidden;
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {"patch_embed.proj.weight", {d, 3, c.temporal, c.patch, c.patch}},
      {"patch_embed.proj.bias", {d}},
      {"pos_embed.weight", {c.pos_side * c.pos_side, d}}};
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    s.push_back({p + "norm1.weight", {d}});
    s.push_back({p + "norm1.bias", {d}});
    s.push_back({p + "norm2.weight", {d}});
    s.push_back({p + "norm2.bias", {d}});
    s.push_back({p + "attn.qkv.weight", {3 * d, d}});
    s.push_back({p + "attn.qkv.bias", {3 * d}});
    s.push_back({p + "attn.proj.weight", {d, d}});
    s.push_back({p + "attn.proj.bias", {d}});
    s.push_back({p + "mlp.linear_fc1.weight", {c.inter, d}});
    s.push_back({p + "mlp.linear_fc1.bias", {c.inter}});
    s.push_back({p + "mlp.linear_fc2.weight", {d, c.inter}});
    s.push_back({p + "mlp.linear_fc2.bias", {d}});
  }
  auto merger = [&](const std::string& p, int64_t norm) {
    s.push_back({p + "norm.weight", {norm}});
    s.push_back({p + "norm.bias", {norm}});
    s.push_back({p + "linear_fc1.weight", {md, md}});
    s.push_back({p + "linear_fc1.bias", {md}});
    s.push_back({p + "linear_fc2.weight", {c.out, md}});
    s.push_back({p + "linear_fc2.bias", {c.out}});
  };
  merger("merger.", d);
  for (size_t k = 0; k < c.deepstack.size(); ++k)
    merger("deepstack_merger_list." + std::to_string(k) + ".", md);
  return s;
}

// One Qwen3VLVisionPatchMerger on all patch rows x [n, d].
Mat merger(const Config& c, const Params& P, const std::string& p, bool postshuffle, const Mat& x,
           int64_t n) {
  const int64_t d = c.hidden, md = 4 * d, tokens = n / 4;
  const Mat normed = postshuffle
                         ? layer_norm(x, tokens, md, P.at(p + "norm.weight"), P.at(p + "norm.bias"))
                         : layer_norm(x, n, d, P.at(p + "norm.weight"), P.at(p + "norm.bias"));
  Mat h =
      linear(normed, tokens, md, P.at(p + "linear_fc1.weight"), P.at(p + "linear_fc1.bias"), md);
  for (double& v : h) v = gelu_erf(v);
  return linear(h, tokens, md, P.at(p + "linear_fc2.weight"), P.at(p + "linear_fc2.bias"), c.out);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c) {
  std::string ds = "[";
  for (size_t i = 0; i < c.deepstack.size(); ++i)
    ds += (i ? ", " : "") + std::to_string(c.deepstack[i]);
  ds += "]";
  return {{"depth", std::to_string(c.depth)},
          {"hidden_size", std::to_string(c.hidden)},
          {"num_heads", std::to_string(c.heads)},
          {"intermediate_size", std::to_string(c.inter)},
          {"out_hidden_size", std::to_string(c.out)},
          {"patch_size", std::to_string(c.patch)},
          {"temporal_patch_size", std::to_string(c.temporal)},
          {"spatial_merge_size", std::to_string(c.merge)},
          {"num_position_embeddings", std::to_string(c.pos_side * c.pos_side)},
          {"deepstack_visual_indexes", ds},
          // Small items: 64x64 pixels at least, frames of any size up to 16 units.
          {"min_pixels", "4096"},
          {"max_pixels", "16384"},
          {"video_min_pixels", "4096"},
          {"video_max_pixels", "65536"},
          {"min_budget", "4"},
          {"max_budget", "64"}};
}

Params random_params(const Config& c, uint64_t seed, const std::string& prefix) {
  return qwen_family_ref::random_params(
      shapes(c), seed, prefix, [](const std::string& name) { return name == "pos_embed.weight"; });
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix) {
  qwen_family_ref::write_params(shapes(c), p, file, prefix);
}

std::vector<uint8_t> random_pixels(int64_t frames, int64_t height, int64_t width, uint64_t seed) {
  return ref64::random_pixels(frames * height, width, 3, seed);
}

Input preprocess(const Config& c, const std::vector<uint8_t>& pixels, int64_t frames,
                 int64_t height, int64_t width) {
  const double half[3] = {0.5, 0.5, 0.5};  // the processor's mean and std
  const int64_t tp = c.temporal, p = c.patch;
  const int64_t padded = (frames + tp - 1) / tp * tp;
  return Input{
      padded / tp, height / p, width / p,
      qwen_family_ref::patch_rows(pixels, frames, height, width, tp, p, c.merge, half, half)};
}

std::vector<std::vector<std::vector<double>>> forward(const Config& c, const Params& P,
                                                      const std::vector<Input>& items,
                                                      const std::string& prefix) {
  Params W;  // names without the prefix
  for (const auto& [k, v] : P) W[k.substr(prefix.size())] = v;
  const int64_t d = c.hidden, hd = c.head_dim(), m = c.merge, N = c.pos_side;
  int64_t n = 0;
  for (const Input& it : items) n += it.t * it.h * it.w;

  // Patch embedding.
  Mat rows;
  for (const Input& it : items) rows.insert(rows.end(), it.rows.begin(), it.rows.end());
  Mat x = linear(rows, n, c.patch_dim(), W.at("patch_embed.proj.weight"),
                 W.at("patch_embed.proj.bias"), d);

  // fast_pos_embed_interpolate: row-major bilinear interpolation of the N x N
  // table, repeated per temporal patch, then permuted into merge-block order.
  // Rotary positions (rot_pos_emb) in the same order. cu_seqlens per temporal patch.
  const Mat& table = W.at("pos_embed.weight");
  std::vector<std::pair<int64_t, int64_t>> pos_ids;
  std::vector<int64_t> cu = {0};
  int64_t row = 0;
  for (const Input& it : items) {
    auto lin = [&](int64_t steps) {
      std::vector<double> v(static_cast<size_t>(steps), 0.0);
      for (int64_t i = 0; i < steps && steps > 1; ++i)
        v[i] = static_cast<double>(i) * static_cast<double>(N - 1) / static_cast<double>(steps - 1);
      return v;
    };
    const std::vector<double> hs = lin(it.h), ws = lin(it.w);
    Mat grid(static_cast<size_t>(it.h * it.w * d), 0.0);  // [h, w, d] row-major
    for (int64_t y = 0; y < it.h; ++y)
      for (int64_t xx = 0; xx < it.w; ++xx) {
        const auto hf = static_cast<int64_t>(std::floor(hs[y]));
        const auto wf = static_cast<int64_t>(std::floor(ws[xx]));
        const int64_t hc = std::min(hf + 1, N - 1), wc = std::min(wf + 1, N - 1);
        const double dh = hs[y] - hf, dw = ws[xx] - wf;
        const int64_t idx[4] = {hf * N + wf, hf * N + wc, hc * N + wf, hc * N + wc};
        const double wt[4] = {(1 - dh) * (1 - dw), (1 - dh) * dw, dh * (1 - dw), dh * dw};
        for (int k = 0; k < 4; ++k)
          for (int64_t j = 0; j < d; ++j)
            grid[(y * it.w + xx) * d + j] += wt[k] * table[idx[k] * d + j];
      }
    for (int64_t t = 0; t < it.t; ++t) {
      for (int64_t bh = 0; bh < it.h / m; ++bh)
        for (int64_t bw = 0; bw < it.w / m; ++bw)
          for (int64_t mh = 0; mh < m; ++mh)
            for (int64_t mw = 0; mw < m; ++mw, ++row) {
              const int64_t y = bh * m + mh, xx = bw * m + mw;
              for (int64_t j = 0; j < d; ++j) x[row * d + j] += grid[(y * it.w + xx) * d + j];
              pos_ids.push_back({y, xx});
            }
      cu.push_back(cu.back() + it.h * it.w);
    }
  }
  const Mat angles = qwen_family_ref::rotary_angles(pos_ids, hd);

  std::vector<Mat> deep(c.deepstack.size());
  std::vector<int64_t> deep_layers;
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    Mat h = layer_norm(x, n, d, W.at(p + "norm1.weight"), W.at(p + "norm1.bias"));
    Mat qkv = linear(h, n, d, W.at(p + "attn.qkv.weight"), W.at(p + "attn.qkv.bias"), 3 * d);
    qwen_family_ref::apply_rotary(qkv, n, d, c.heads, angles);
    const Mat attn = qwen_family_ref::segment_attention(qkv, n, d, c.heads, cu);
    const Mat o = linear(attn, n, d, W.at(p + "attn.proj.weight"), W.at(p + "attn.proj.bias"), d);
    for (size_t k = 0; k < x.size(); ++k) x[k] += o[k];
    h = layer_norm(x, n, d, W.at(p + "norm2.weight"), W.at(p + "norm2.bias"));
    Mat f = linear(h, n, d, W.at(p + "mlp.linear_fc1.weight"), W.at(p + "mlp.linear_fc1.bias"),
                   c.inter);
    for (double& v : f) v = gelu_tanh(v);
    const Mat o2 = linear(f, n, c.inter, W.at(p + "mlp.linear_fc2.weight"),
                          W.at(p + "mlp.linear_fc2.bias"), d);
    for (size_t k = 0; k < x.size(); ++k) x[k] += o2[k];
    const auto at = std::find(c.deepstack.begin(), c.deepstack.end(), i);
    if (at != c.deepstack.end()) {
      const auto k = static_cast<size_t>(at - c.deepstack.begin());
      deep[deep_layers.size()] =
          merger(c, W, "deepstack_merger_list." + std::to_string(k) + ".", true, x, n);
      deep_layers.push_back(i);
    }
  }
  std::vector<Mat> all = {merger(c, W, "merger.", false, x, n)};
  for (Mat& m2 : deep) all.push_back(std::move(m2));

  // Split each output into items.
  std::vector<std::vector<Mat>> out(all.size());
  for (size_t o = 0; o < all.size(); ++o) {
    int64_t tok = 0;
    for (const Input& it : items) {
      const int64_t nt = it.t * it.h * it.w / 4;
      out[o].push_back(Mat(all[o].begin() + tok * c.out, all[o].begin() + (tok + nt) * c.out));
      tok += nt;
    }
  }
  return out;
}

}  // namespace qwen3_ref
