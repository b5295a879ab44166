#include "dsocr2_weights.hpp"

#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>

namespace dsocr2 {
namespace {

namespace cpu = encoder_kit::cpu;
using Vec = std::vector<float>;

constexpr float kEps = 1e-6f;

// PyTorch's antialiased bicubic (Keys a = -0.5), align_corners=False: [out, in].
std::vector<double> bicubic_aa(int64_t in, int64_t out) {
  auto cubic = [](double x) {
    const double a = -0.5;
    x = std::fabs(x);
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
  };
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
  std::vector<double> wts(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    double total = 0;
    for (int64_t j = lo; j < hi; ++j) total += cubic((static_cast<double>(j) - center + 0.5) * inv);
    for (int64_t j = lo; j < hi; ++j)
      wts[static_cast<size_t>(i * in + j)] =
          cubic((static_cast<double>(j) - center + 0.5) * inv) / total;
  }
  return wts;
}

// get_rel_pos: F.interpolate(mode="linear", align_corners=False) to `out` rows.
Vec resize_rows(const Vec& t, int64_t len, int64_t hd, int64_t out) {
  Vec y(static_cast<size_t>(out * hd));
  const double scale = static_cast<double>(len) / static_cast<double>(out);
  for (int64_t i = 0; i < out; ++i) {
    const double src = std::max(scale * (static_cast<double>(i) + 0.5) - 0.5, 0.0);
    const int64_t i0 = static_cast<int64_t>(src);
    const int64_t i1 = i0 + (i0 < len - 1 ? 1 : 0);
    const double l = src - static_cast<double>(i0);
    for (int64_t c = 0; c < hd; ++c)
      y[static_cast<size_t>(i * hd + c)] = static_cast<float>(
          (1 - l) * t[static_cast<size_t>(i0 * hd + c)] + l * t[static_cast<size_t>(i1 * hd + c)]);
  }
  return y;
}

// im2col for Conv2d(k x k, stride, pad) on a channels-last [h, w, cin] map:
// rows [ho*wo, cin*k*k] in the weight's (c, ky, kx) order.
Vec im2col(const float* x, int64_t h, int64_t w, int64_t cin, int64_t k, int64_t stride,
           int64_t pad, int64_t& ho, int64_t& wo) {
  ho = (h + 2 * pad - k) / stride + 1;
  wo = (w + 2 * pad - k) / stride + 1;
  Vec cols(static_cast<size_t>(ho * wo * cin * k * k), 0.0f);
  for (int64_t oy = 0; oy < ho; ++oy)
    for (int64_t ox = 0; ox < wo; ++ox) {
      float* row = cols.data() + (oy * wo + ox) * cin * k * k;
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
          if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
          const float* src = x + (iy * w + ix) * cin;
          for (int64_t c = 0; c < cin; ++c) row[(c * k + ky) * k + kx] = src[c];
        }
    }
  return cols;
}

Vec conv(const Vec& x, int64_t& h, int64_t& w, int64_t cin, const Vec& weight, int64_t cout,
         int64_t k, int64_t stride, int64_t pad) {
  int64_t ho = 0, wo = 0;
  const Vec cols = im2col(x.data(), h, w, cin, k, stride, pad, ho, wo);
  Vec y(static_cast<size_t>(ho * wo * cout));
  cpu::linear(cols.data(), ho * wo, cin * k * k, weight.data(), nullptr, cout, y.data());
  h = ho;
  w = wo;
  return y;
}

}  // namespace

CpuModel::CpuModel(const ModelConfig& m, Weights w) : m_(m), w_(std::move(w)) {
  global_ = view_tables(m_, w_, m_.global_size);
  local_ = view_tables(m_, w_, m_.tile_size);
}

ViewTables view_tables(const ModelConfig& m, const Weights& w, int64_t side) {
  ViewTables t;
  t.side = side;
  t.grid = m.grid(side);
  const int64_t g = t.grid, G = m.pos_grid(), d = m.sam_hidden_size, hd = m.sam_head_dim();
  // interpolate_pos_encoding: as is at the pretraining grid, else bicubic AA.
  t.pos.resize(static_cast<size_t>(g * g * d));
  if (g == G) {
    std::copy(w.pos_embed.begin(), w.pos_embed.end(), t.pos.begin());
  } else {
    const std::vector<double> wi = bicubic_aa(G, g);
    std::vector<double> rows(static_cast<size_t>(g * G * d), 0.0);  // along y first
    for (int64_t y = 0; y < g; ++y)
      for (int64_t i = 0; i < G; ++i) {
        const double a = wi[static_cast<size_t>(y * G + i)];
        if (a == 0) continue;
        for (int64_t x = 0; x < G * d; ++x)
          rows[static_cast<size_t>(y * G * d + x)] +=
              a * w.pos_embed[static_cast<size_t>(i * G * d + x)];
      }
    for (int64_t y = 0; y < g; ++y)
      for (int64_t x = 0; x < g; ++x)
        for (int64_t k = 0; k < d; ++k) {
          double s = 0;
          for (int64_t j = 0; j < G; ++j)
            s +=
                wi[static_cast<size_t>(x * G + j)] * rows[static_cast<size_t>((y * G + j) * d + k)];
          t.pos[static_cast<size_t>((y * g + x) * d + k)] = static_cast<float>(s);
        }
  }
  for (int64_t l = 0; l < m.sam_layers; ++l) {
    const bool global = m.is_global_layer(l);
    const int64_t table = 2 * (global ? G : m.window_size) - 1;
    const int64_t win = global ? g : m.window_size;
    t.rel_h.push_back(resize_rows(w.sam[static_cast<size_t>(l)].rel_h, table, hd, 2 * win - 1));
    t.rel_w.push_back(resize_rows(w.sam[static_cast<size_t>(l)].rel_w, table, hd, 2 * win - 1));
  }
  // Rotary over [image tokens | queries]: positions 0 .. 2n-1.
  const int64_t L = 2 * m.view_tokens(side), ehd = m.encoder_head_dim();
  t.cos.resize(static_cast<size_t>(L * ehd / 2));
  t.sin.resize(t.cos.size());
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < ehd / 2; ++j) {
      const double inv =
          std::pow(m.rope_theta, -2.0 * static_cast<double>(j) / static_cast<double>(ehd));
      const double a = static_cast<double>(i) * inv;
      t.cos[static_cast<size_t>(i * ehd / 2 + j)] = static_cast<float>(std::cos(a));
      t.sin[static_cast<size_t>(i * ehd / 2 + j)] = static_cast<float>(std::sin(a));
    }
  return t;
}

void CpuModel::encode(const float* views, int64_t count, int64_t side, float* out) const {
  const ViewTables& t = side == m_.global_size ? global_ : local_;
  if (side != t.side)
    encoder_kit::fail(EG_ERR_INTERNAL,
                      "deepseek_ocr2: no tables for views of " + std::to_string(side) + " pixels");
  const int64_t per_view = 3 * side * side, rows = m_.view_tokens(side) * m_.text_hidden_size;
  for (int64_t v = 0; v < count; ++v) encode_one(views + v * per_view, t, out + v * rows);
}

void CpuModel::encode_one(const float* view, const ViewTables& t, float* out) const {
  const int64_t d = m_.sam_hidden_size, heads = m_.sam_heads, hd = m_.sam_head_dim();
  const int64_t p = m_.patch_size, g = t.grid, side = t.side, gg = g * g;
  // Patch embedding: Conv2d(3, D, p, stride p) as rows of (c, ky, kx).
  Vec cols(static_cast<size_t>(gg * 3 * p * p));
  for (int64_t y = 0; y < g; ++y)
    for (int64_t x = 0; x < g; ++x) {
      float* row = cols.data() + (y * g + x) * 3 * p * p;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t ky = 0; ky < p; ++ky)
          for (int64_t kx = 0; kx < p; ++kx)
            row[(c * p + ky) * p + kx] = view[(c * side + y * p + ky) * side + x * p + kx];
    }
  Vec x(static_cast<size_t>(gg * d));
  cpu::linear(cols.data(), gg, 3 * p * p, w_.patch_w.data(), w_.patch_b.data(), d, x.data());
  for (size_t i = 0; i < x.size(); ++i) x[i] += t.pos[i];

  Vec h(x.size());
  for (int64_t l = 0; l < m_.sam_layers; ++l) {
    const SamLayerWeights& lw = w_.sam[static_cast<size_t>(l)];
    const bool global = m_.is_global_layer(l);
    const int64_t win = global ? g : m_.window_size;
    const int64_t per = (g + win - 1) / win, n = win * win, windows = per * per, N = windows * n;
    cpu::layer_norm(x.data(), gg, d, lw.norm1_w.data(), lw.norm1_b.data(), kEps, h.data());
    // window_partition: zero rows past the map are real keys and values.
    Vec tok(static_cast<size_t>(N * d), 0.0f);
    for (int64_t wi = 0; wi < windows; ++wi)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t yy = (wi / per) * win + i / win, xx = (wi % per) * win + i % win;
        if (yy < g && xx < g)
          std::copy_n(h.data() + (yy * g + xx) * d, d, tok.data() + (wi * n + i) * d);
      }
    Vec qkv(static_cast<size_t>(N * 3 * d));
    cpu::linear(tok.data(), N, d, lw.qkv_w.data(), lw.qkv_b.data(), 3 * d, qkv.data());
    Vec att(static_cast<size_t>(N * d));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const Vec& rh = t.rel_h[static_cast<size_t>(l)];
    const Vec& rw = t.rel_w[static_cast<size_t>(l)];
    cpu::pool().parallel_for(windows * heads, 1, [&](int64_t begin, int64_t end, int) {
      std::vector<float> score(static_cast<size_t>(n)), bh(static_cast<size_t>(win)),
          bw(static_cast<size_t>(win));
      for (int64_t task = begin; task < end; ++task) {
        const int64_t wi = task / heads, head = task % heads;
        const float* base = qkv.data() + wi * n * 3 * d;
        for (int64_t i = 0; i < n; ++i) {
          const float* q = base + i * 3 * d + head * hd;
          const int64_t qy = i / win, qx = i % win;
          // decomposed relative positions with the unscaled query
          for (int64_t k = 0; k < win; ++k) {
            float sh = 0, sw = 0;
            const float* th = rh.data() + (qy - k + win - 1) * hd;
            const float* tw = rw.data() + (qx - k + win - 1) * hd;
            for (int64_t c = 0; c < hd; ++c) {
              sh += q[c] * th[c];
              sw += q[c] * tw[c];
            }
            bh[static_cast<size_t>(k)] = sh;
            bw[static_cast<size_t>(k)] = sw;
          }
          float mx = -INFINITY;
          for (int64_t j = 0; j < n; ++j) {
            const float* k = base + j * 3 * d + d + head * hd;
            float dot = 0;
            for (int64_t c = 0; c < hd; ++c) dot += q[c] * k[c];
            const float s =
                dot * scale + bh[static_cast<size_t>(j / win)] + bw[static_cast<size_t>(j % win)];
            score[static_cast<size_t>(j)] = s;
            mx = std::max(mx, s);
          }
          float sum = 0;
          for (float& s : score) sum += (s = std::exp(s - mx));
          float* o = att.data() + (wi * n + i) * d + head * hd;
          std::fill(o, o + hd, 0.0f);
          for (int64_t j = 0; j < n; ++j) {
            const float a = score[static_cast<size_t>(j)] / sum;
            const float* v = base + j * 3 * d + 2 * d + head * hd;
            for (int64_t c = 0; c < hd; ++c) o[c] += a * v[c];
          }
        }
      }
    });
    Vec proj(static_cast<size_t>(N * d));
    cpu::linear(att.data(), N, d, lw.proj_w.data(), lw.proj_b.data(), d, proj.data());
    for (int64_t wi = 0; wi < windows; ++wi)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t yy = (wi / per) * win + i / win, xx = (wi % per) * win + i % win;
        if (yy >= g || xx >= g) continue;
        float* dst = x.data() + (yy * g + xx) * d;
        const float* src = proj.data() + (wi * n + i) * d;
        for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
      }
    cpu::layer_norm(x.data(), gg, d, lw.norm2_w.data(), lw.norm2_b.data(), kEps, h.data());
    Vec mid(static_cast<size_t>(gg * m_.sam_mlp_dim));
    cpu::linear(h.data(), gg, d, lw.lin1_w.data(), lw.lin1_b.data(), m_.sam_mlp_dim, mid.data());
    cpu::gelu_erf(mid.data(), mid.size());
    cpu::linear(mid.data(), gg, m_.sam_mlp_dim, lw.lin2_w.data(), lw.lin2_b.data(), d, x.data(),
                /*accumulate=*/true);
  }

  // Neck and downsampling (channels-last; LayerNorm2d = LayerNorm per position).
  const int64_t C = m_.neck_channels, c1 = m_.downsample_channels[0], e = m_.encoder_hidden();
  int64_t hh = g, ww = g;
  Vec y(static_cast<size_t>(gg * C));
  cpu::linear(x.data(), gg, d, w_.neck1_w.data(), nullptr, C, y.data());
  cpu::layer_norm(y.data(), gg, C, w_.neck_ln1_w.data(), w_.neck_ln1_b.data(), kEps, y.data());
  y = conv(y, hh, ww, C, w_.neck2_w, C, 3, 1, 1);
  cpu::layer_norm(y.data(), hh * ww, C, w_.neck_ln2_w.data(), w_.neck_ln2_b.data(), kEps, y.data());
  y = conv(y, hh, ww, C, w_.down1_w, c1, 3, 2, 1);
  y = conv(y, hh, ww, c1, w_.down2_w, e, 3, 2, 1);

  // Encoder over [n image tokens | n learned queries].
  const int64_t n = hh * ww, L = 2 * n, eh = m_.encoder_heads, kvh = m_.encoder_kv_heads;
  const int64_t ehd = m_.encoder_head_dim(), inter = m_.encoder_intermediate_size;
  const Vec& queries = side == m_.tile_size ? w_.query_local : w_.query_global;
  Vec s(static_cast<size_t>(L * e));
  std::copy(y.begin(), y.end(), s.begin());
  std::copy(queries.begin(), queries.end(), s.begin() + n * e);
  Vec hn(s.size()), q(static_cast<size_t>(L * eh * ehd)), k(static_cast<size_t>(L * kvh * ehd));
  Vec v(k.size()), o(q.size()), gate(static_cast<size_t>(L * inter)), up(gate.size());
  const float escale = 1.0f / std::sqrt(static_cast<float>(ehd));
  for (const EncoderLayerWeights& lw : w_.encoder) {
    cpu::rms_norm(s.data(), L, e, lw.norm1.data(), kEps, hn.data());
    cpu::linear(hn.data(), L, e, lw.q_w.data(), lw.q_b.data(), eh * ehd, q.data());
    cpu::linear(hn.data(), L, e, lw.k_w.data(), lw.k_b.data(), kvh * ehd, k.data());
    cpu::linear(hn.data(), L, e, lw.v_w.data(), lw.v_b.data(), kvh * ehd, v.data());
    cpu::rotary_half(q.data(), L, eh * ehd, eh, ehd, t.cos.data(), t.sin.data());
    cpu::rotary_half(k.data(), L, kvh * ehd, kvh, ehd, t.cos.data(), t.sin.data());
    cpu::pool().parallel_for(eh * L, 16, [&](int64_t begin, int64_t end, int) {
      std::vector<float> score(static_cast<size_t>(L));
      for (int64_t task = begin; task < end; ++task) {
        const int64_t head = task / L, i = task % L, kv = head / (eh / kvh);
        // image rows see every image row; query rows also see queries up to themselves
        const int64_t visible = i < n ? n : i + 1;
        const float* qi = q.data() + i * eh * ehd + head * ehd;
        float mx = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          const float* kj = k.data() + j * kvh * ehd + kv * ehd;
          float dot = 0;
          for (int64_t c = 0; c < ehd; ++c) dot += qi[c] * kj[c];
          score[static_cast<size_t>(j)] = dot * escale;
          mx = std::max(mx, dot * escale);
        }
        float sum = 0;
        for (int64_t j = 0; j < visible; ++j)
          sum += (score[static_cast<size_t>(j)] = std::exp(score[static_cast<size_t>(j)] - mx));
        float* oi = o.data() + i * eh * ehd + head * ehd;
        std::fill(oi, oi + ehd, 0.0f);
        for (int64_t j = 0; j < visible; ++j) {
          const float a = score[static_cast<size_t>(j)] / sum;
          const float* vj = v.data() + j * kvh * ehd + kv * ehd;
          for (int64_t c = 0; c < ehd; ++c) oi[c] += a * vj[c];
        }
      }
    });
    cpu::linear(o.data(), L, eh * ehd, lw.o_w.data(), nullptr, e, s.data(), /*accumulate=*/true);
    cpu::rms_norm(s.data(), L, e, lw.norm2.data(), kEps, hn.data());
    cpu::linear(hn.data(), L, e, lw.gate_w.data(), nullptr, inter, gate.data());
    cpu::linear(hn.data(), L, e, lw.up_w.data(), nullptr, inter, up.data());
    cpu::silu_mul(gate.data(), up.data(), gate.size());
    cpu::linear(gate.data(), L, inter, lw.down_w.data(), nullptr, e, s.data(), /*accumulate=*/true);
  }
  // Final norm on the query rows only (the image rows are dropped), then the projector.
  cpu::rms_norm(s.data() + n * e, n, e, w_.encoder_norm.data(), kEps, hn.data());
  cpu::linear(hn.data(), n, e, w_.proj_w.data(), w_.proj_b.data(), m_.text_hidden_size, out);
}

}  // namespace dsocr2
