#include "dsocr2_cuda_model.hpp"

#include "dsocr2_kernels.hpp"
#include "dsocr2_weights.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/model_context.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dsocr2 {
namespace {

namespace k = encoder_kit::cuda;
using k::align_up;
using k::bf16;
using Epilogue = k::GemmPlan::Epilogue;

constexpr const char* kWho = "deepseek_ocr2 CUDA";  // leads every error message
constexpr float kEps = 1e-6f;

void check(int rc, const char* what) {
  k::throw_on_kit_failure(kWho, rc, what);
}

// The sizes of one view of `side` pixels through the tower.
struct Dims {
  int64_t g = 0, gg = 0;   // patch grid
  int64_t win_rows = 0;    // rows of a windowed layer: per^2 windows of win^2 (with padding)
  int64_t g2 = 0, g4 = 0;  // after the stride-2 convolutions
  int64_t n = 0, L = 0;    // image tokens (= queries) and the encoder's sequence

  Dims(const ModelConfig& m, int64_t side) {
    g = m.grid(side);
    gg = g * g;
    const int64_t per = (g + m.window_size - 1) / m.window_size;
    win_rows = std::max(per * per * m.window_size * m.window_size, gg);
    g2 = (g - 1) / 2 + 1;
    g4 = (g2 - 1) / 2 + 1;
    n = g4 * g4;
    L = 2 * n;
  }
};

struct DeviceSamLayer {
  const bf16 *norm1_w, *norm1_b, *norm2_w, *norm2_b;
  const bf16 *qkv_w, *qkv_b, *proj_w, *proj_b, *lin1_w, *lin1_b, *lin2_w, *lin2_b;
};

struct DeviceEncoderLayer {
  const bf16 *norm1, *norm2, *qkv_w, *qkv_b, *o_w, *gate_up_w, *down_w;
};

// Tables that depend on the view size (dsocr2::view_tables), per path.
struct DeviceTables {
  int64_t side = 0;
  const bf16* pos = nullptr;                   // [gg, D]
  std::vector<const bf16*> rel_h, rel_w;       // per SAM layer [2 win - 1 (padded to 8), hd]
  const float *cos = nullptr, *sin = nullptr;  // [L, hd / 2]
  const bf16* queries = nullptr;               // [n, E]
};

// Activations of one forward, carved from the runtime's workspace.
struct Activations {
  bf16 *x, *normed, *win, *qkv, *attn, *mlp;
  bf16 *y1, *y2, *cols, *d1, *d2;
  bf16 *seq, *hn, *eqkv, *eo, *gu, *act, *qrows, *qn;
  void* gemm_ws;
  size_t total;
};

Activations carve(const ModelConfig& m, int64_t side, int64_t views, char* base) {
  const Dims d(m, side);
  const size_t V = static_cast<size_t>(views);
  const size_t D = static_cast<size_t>(m.sam_hidden_size), C = static_cast<size_t>(m.neck_channels);
  const size_t c1 = static_cast<size_t>(m.downsample_channels[0]);
  const size_t E = static_cast<size_t>(m.encoder_hidden());
  const size_t ehd = static_cast<size_t>(m.encoder_head_dim());
  const size_t qkv_w = static_cast<size_t>(m.encoder_heads + 2 * m.encoder_kv_heads) * ehd;
  const size_t I = static_cast<size_t>(m.encoder_intermediate_size);
  const size_t gg = static_cast<size_t>(d.gg), ra = static_cast<size_t>(d.win_rows);
  const size_t g2 = static_cast<size_t>(d.g2 * d.g2), n = static_cast<size_t>(d.n);
  const size_t L = static_cast<size_t>(d.L);
  const size_t patch_k = static_cast<size_t>(3 * m.patch_size * m.patch_size);
  Activations a{};
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* p = base ? base + off : nullptr;
    off += align_up(bytes);
    return p;
  };
  auto bf = [&](size_t elems) { return reinterpret_cast<bf16*>(take(elems * 2)); };
  a.x = bf(V * gg * D);
  a.normed = bf(V * gg * std::max(D, patch_k));  // also the patch embedding's im2col rows
  a.win = bf(V * ra * D);
  a.qkv = bf(V * ra * 3 * D);
  a.attn = bf(V * ra * D);
  a.mlp = bf(V * gg * static_cast<size_t>(m.sam_mlp_dim));
  a.y1 = bf(V * gg * C);
  a.y2 = bf(V * gg * C);
  a.cols = bf(V * std::max(gg * 9 * C, static_cast<size_t>(d.g4 * d.g4) * 9 * c1));
  a.d1 = bf(V * g2 * c1);
  a.d2 = bf(V * n * E);
  a.seq = bf(V * L * E);
  a.hn = bf(V * L * E);
  a.eqkv = bf(V * L * qkv_w);
  a.eo = bf(V * L * static_cast<size_t>(m.encoder_heads) * ehd);
  a.gu = bf(V * L * 2 * I);
  a.act = bf(V * L * I);
  a.qrows = bf(V * n * E);
  a.qn = bf(V * n * E);
  a.gemm_ws = take(k::GemmPlan::workspace_bytes());
  a.total = off;
  return a;
}

// OIHW 3x3 kernels as [cout, 3, 3, cin]: the im2col rows' (ky, kx, c) order.
std::vector<float> conv3x3_rows(const std::vector<float>& w, int64_t cout, int64_t cin) {
  std::vector<float> r(w.size());
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t tap = 0; tap < 9; ++tap)
        r[static_cast<size_t>((o * 9 + tap) * cin + c)] =
            w[static_cast<size_t>((o * cin + c) * 9 + tap)];
  return r;
}

// A relative-position table [rows, hd] with zero rows up to a multiple of 8
// (the attention kernel reads it in 8-row tiles).
std::vector<float> pad_rows8(std::vector<float> table, int64_t hd) {
  const size_t rows = table.size() / static_cast<size_t>(hd);
  table.resize((rows + 7) / 8 * 8 * static_cast<size_t>(hd), 0.0f);
  return table;
}

std::vector<float> concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> r;
  for (const auto* p : parts) r.insert(r.end(), p->begin(), p->end());
  return r;
}

}  // namespace

struct CudaModel::Impl {
  ModelConfig m;
  int device = 0;
  k::DeviceWeights weights;  // one allocation for every parameter and table
  const bf16 *patch_w = nullptr, *patch_b = nullptr;
  std::vector<DeviceSamLayer> sam;
  const bf16 *neck1_w = nullptr, *neck_ln1_w = nullptr, *neck_ln1_b = nullptr;
  const bf16 *neck2_w = nullptr, *neck_ln2_w = nullptr, *neck_ln2_b = nullptr;
  const bf16 *down1_w = nullptr, *down2_w = nullptr;
  std::vector<DeviceEncoderLayer> enc;
  const bf16 *enc_norm = nullptr, *proj_w = nullptr, *proj_b = nullptr, *separator = nullptr;
  DeviceTables global, local;
  k::GemmPlan patch, sam_qkv, sam_proj, sam_proj_res, lin1, lin2, neck1, neck2, down1, down2;
  k::GemmPlan enc_qkv, enc_o, enc_gate_up, enc_down, projector;
  int64_t planned_budget = 0;
  std::set<std::pair<const k::GemmPlan*, int64_t>> tuned;  // each product's timed sizes
  k::ModelContext ctx{kWho};  // last member: its handle is destroyed first

  const DeviceTables& tables(int64_t side) const {
    if (side == m.global_size) return global;
    if (side == m.tile_size) return local;
    encoder_kit::fail(EG_ERR_INTERNAL, std::string(kWho) + ": no tables for views of " +
                                           std::to_string(side) + " pixels");
  }

  void upload(const Weights& w) {
    const int64_t C = m.neck_channels, c1 = m.downsample_channels[0], E = m.encoder_hidden();
    weights.add(&patch_w, w.patch_w);
    weights.add(&patch_b, w.patch_b);
    sam.resize(w.sam.size());
    for (size_t i = 0; i < w.sam.size(); ++i) {
      const SamLayerWeights& l = w.sam[i];
      DeviceSamLayer& d = sam[i];
      weights.add(&d.norm1_w, l.norm1_w);
      weights.add(&d.norm1_b, l.norm1_b);
      weights.add(&d.norm2_w, l.norm2_w);
      weights.add(&d.norm2_b, l.norm2_b);
      weights.add(&d.qkv_w, l.qkv_w);
      weights.add(&d.qkv_b, l.qkv_b);
      weights.add(&d.proj_w, l.proj_w);
      weights.add(&d.proj_b, l.proj_b);
      weights.add(&d.lin1_w, l.lin1_w);
      weights.add(&d.lin1_b, l.lin1_b);
      weights.add(&d.lin2_w, l.lin2_w);
      weights.add(&d.lin2_b, l.lin2_b);
    }
    weights.add(&neck1_w, w.neck1_w);
    weights.add(&neck_ln1_w, w.neck_ln1_w);
    weights.add(&neck_ln1_b, w.neck_ln1_b);
    weights.add(&neck2_w, conv3x3_rows(w.neck2_w, C, C));
    weights.add(&neck_ln2_w, w.neck_ln2_w);
    weights.add(&neck_ln2_b, w.neck_ln2_b);
    weights.add(&down1_w, conv3x3_rows(w.down1_w, c1, C));
    weights.add(&down2_w, conv3x3_rows(w.down2_w, E, c1));
    enc.resize(w.encoder.size());
    for (size_t i = 0; i < w.encoder.size(); ++i) {
      const EncoderLayerWeights& l = w.encoder[i];
      DeviceEncoderLayer& d = enc[i];
      weights.add(&d.norm1, l.norm1);
      weights.add(&d.norm2, l.norm2);
      // q, k and v in one product: rows [q heads | k heads | v heads].
      weights.add(&d.qkv_w, concat({&l.q_w, &l.k_w, &l.v_w}));
      weights.add(&d.qkv_b, concat({&l.q_b, &l.k_b, &l.v_b}));
      weights.add(&d.o_w, l.o_w);
      weights.add(&d.gate_up_w,
                  concat({&l.gate_w, &l.up_w}));  // [gate | up] columns of one product
      weights.add(&d.down_w, l.down_w);
    }
    weights.add(&enc_norm, w.encoder_norm);
    weights.add(&proj_w, w.proj_w);
    weights.add(&proj_b, w.proj_b);
    weights.add(&separator, w.view_separator);
    for (DeviceTables* t : {&global, &local}) {
      t->side = t == &global ? m.global_size : m.tile_size;
      ViewTables vt = view_tables(m, w, t->side);
      weights.add(&t->pos, std::move(vt.pos));
      t->rel_h.assign(vt.rel_h.size(), nullptr);
      t->rel_w.assign(vt.rel_w.size(), nullptr);
      for (size_t l = 0; l < vt.rel_h.size(); ++l) {
        weights.add(&t->rel_h[l], pad_rows8(std::move(vt.rel_h[l]), m.sam_head_dim()));
        weights.add(&t->rel_w[l], pad_rows8(std::move(vt.rel_w[l]), m.sam_head_dim()));
      }
      weights.add(&t->cos, std::move(vt.cos));
      weights.add(&t->sin, std::move(vt.sin));
      weights.add(&t->queries, t == &global ? w.query_global : w.query_local);
    }
    weights.upload(kWho);
  }

  // Products planned for graphs of up to `budget` query tokens on either path.
  void plan_products(int64_t budget) {
    const int64_t D = m.sam_hidden_size, C = m.neck_channels, c1 = m.downsample_channels[0];
    const int64_t E = m.encoder_hidden(), hd = m.encoder_head_dim(),
                  I = m.encoder_intermediate_size;
    const int64_t qkv_n = (m.encoder_heads + 2 * m.encoder_kv_heads) * hd;
    // The largest row count of each product over both paths.
    int64_t gg = 1, wr = 1, g2 = 1, n = 1, L = 1;
    for (int64_t side : {m.global_size, m.tile_size}) {
      const Dims d(m, side);
      const int64_t v = std::max<int64_t>(budget / m.view_tokens(side), 1);
      gg = std::max(gg, v * d.gg);
      wr = std::max(wr, v * d.win_rows);
      g2 = std::max(g2, v * d.g2 * d.g2);
      n = std::max(n, v * d.n);
      L = std::max(L, v * d.L);
    }
    check(patch.initialize(gg, D, 3 * m.patch_size * m.patch_size, Epilogue::Bias, false),
          "planning patch_embed");
    check(sam_qkv.initialize(wr, 3 * D, D, Epilogue::Bias, false), "planning attn.qkv");
    check(sam_proj.initialize(wr, D, D, Epilogue::Bias, false), "planning attn.proj");
    check(sam_proj_res.initialize(gg, D, D, Epilogue::Bias, true), "planning attn.proj");
    check(lin1.initialize(gg, m.sam_mlp_dim, D, Epilogue::BiasGelu, false), "planning mlp.lin1");
    check(lin2.initialize(gg, D, m.sam_mlp_dim, Epilogue::Bias, true), "planning mlp.lin2");
    check(neck1.initialize(gg, C, D, Epilogue::None, false), "planning neck conv1");
    check(neck2.initialize(gg, C, 9 * C, Epilogue::None, false), "planning neck conv2");
    check(down1.initialize(g2, c1, 9 * C, Epilogue::None, false), "planning downsample conv1");
    check(down2.initialize(n, E, 9 * c1, Epilogue::None, false), "planning downsample conv2");
    check(enc_qkv.initialize(L, qkv_n, E, Epilogue::Bias, false), "planning encoder q/k/v_proj");
    check(enc_o.initialize(L, E, m.encoder_heads * hd, Epilogue::None, true),
          "planning encoder o_proj");
    check(enc_gate_up.initialize(L, 2 * I, E, Epilogue::None, false),
          "planning encoder gate/up_proj");
    check(enc_down.initialize(L, E, I, Epilogue::None, true), "planning encoder down_proj");
    check(projector.initialize(n, m.text_hidden_size, E, Epilogue::Bias, false),
          "planning multi_modal_projector");
    ctx.planned({&patch, &sam_qkv, &sam_proj, &sam_proj_res, &lin1, &lin2, &neck1, &neck2, &down1,
                 &down2, &enc_qkv, &enc_o, &enc_gate_up, &enc_down, &projector});
    planned_budget = budget;
    tuned.clear();
  }
};

CudaModel::CudaModel(const ModelConfig& m, const Weights& w, int device_index, int64_t max_budget,
                     const std::string& tuning_cache, std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  impl_->m = m;
  impl_->device = device_index;
  impl_->ctx.select_device(device_index);
  for (const auto& [name, hd] : {std::pair<const char*, int64_t>{"SAM", m.sam_head_dim()},
                                 {"encoder", m.encoder_head_dim()}})
    if (hd % 8 != 0 || hd > 64)
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,  // a config the user can change: exit 2
                        std::string(kWho) + ": the attention kernel needs the " + name +
                            " head_dim a multiple of 8 up to 64, got " + std::to_string(hd));
  for (int64_t side : {m.global_size, m.tile_size})
    if (std::max(m.grid(side), m.window_size) > k::kMaxRelGrid)
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                        std::string(kWho) + ": views of " + std::to_string(side) +
                            " pixels make a " + std::to_string(m.grid(side)) +
                            "-patch grid; the attention kernel's " +
                            "relative-position bias allows grids and windows up to " +
                            std::to_string(k::kMaxRelGrid) +
                            " (lower global_size / tile_size or raise patch_size)");
  impl_->upload(w);
  impl_->ctx.open(device_index, tuning_cache, "deepseek_ocr2", std::move(warn));
  impl_->plan_products(std::max<int64_t>(max_budget, 1));
}

CudaModel::~CudaModel() = default;

size_t CudaModel::workspace_bytes(int64_t side, int64_t views) const {
  return carve(impl_->m, side, std::max<int64_t>(views, 0), nullptr).total;
}

void CudaModel::assemble(const ItemData& it, const void* local, int64_t local_row,
                         const void* global, int64_t global_row, void* out, void* stream) const {
  const ModelConfig& m = impl_->m;
  const auto s = static_cast<cudaStream_t>(stream);
  const size_t row = static_cast<size_t>(m.text_hidden_size) * 2;
  auto copy = [&](char* dst, const void* src, int64_t rows) {
    const cudaError_t e =
        cudaMemcpyAsync(dst, src, static_cast<size_t>(rows) * row, cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess)
      encoder_kit::fail(EG_ERR_DEVICE, std::string("deepseek_ocr2 CUDA: copying output rows: ") +
                                           cudaGetErrorString(e));
  };
  auto* dst = static_cast<char*>(out);
  const int64_t local_rows = it.views.num_crops * m.local_tokens();
  if (local_rows > 0)
    copy(dst, static_cast<const char*>(local) + static_cast<size_t>(local_row) * row, local_rows);
  copy(dst + static_cast<size_t>(local_rows) * row,
       static_cast<const char*>(global) + static_cast<size_t>(global_row) * row, m.global_tokens());
  copy(dst + static_cast<size_t>(local_rows + m.global_tokens()) * row, impl_->separator, 1);
}

void CudaModel::forward(int64_t side, int64_t views, const void* pixels_ptr,
                        const int32_t* view_count, void* out, void* workspace,
                        size_t workspace_size, void* stream, bool tune) {
  Impl& I = *impl_;
  const ModelConfig& m = I.m;
  auto s = static_cast<cudaStream_t>(stream);
  const DeviceTables& t = I.tables(side);
  const Dims d(m, side);
  const Activations a = carve(m, side, views, static_cast<char*>(workspace));
  I.ctx.check_workspace(a.total, workspace_size, /*say_needed=*/true);
  if (views <= 0) return;
  const bool in_capture = I.ctx.capturing(s);
  const int64_t budget = views * m.view_tokens(side);
  if (budget > I.planned_budget)
    I.ctx.grow_plan(in_capture, budget, "tokens", [&] { I.plan_products(budget); });
  const bool tuning = tune && !in_capture;
  // One product; on the warm-up run its algorithm is timed first (for a
  // residual product into `scratch`, so that C is not accumulated twice).
  auto gemm = [&](k::GemmPlan& p, const bf16* A, const bf16* W, const bf16* bias,
                  const bf16* residual, bf16* C, int64_t rows, bf16* scratch, const char* what) {
    if (tuning && I.tuned.insert({&p, rows}).second)
      I.ctx.tune(p, A, W, bias, residual, residual ? scratch : C, rows, a.gemm_ws, s, what);
    I.ctx.run(p, A, W, bias, residual, C, rows, a.gemm_ws, s, what);
  };

  const int64_t V = views, D = m.sam_hidden_size, g = d.g, gg = d.gg;
  const int heads = static_cast<int>(m.sam_heads), hd = static_cast<int>(m.sam_head_dim());
  const auto* pixels = static_cast<const bf16*>(pixels_ptr);

  // Patch embedding (Conv2d with stride = kernel: im2col + one product), then
  // the position table of this view size.
  check(cuda::patch_im2col_bf16(pixels, V, static_cast<int>(side), static_cast<int>(m.patch_size),
                                a.normed, s),
        "patch_embed im2col");
  gemm(I.patch, a.normed, I.patch_w, I.patch_b, nullptr, a.x, V * gg, nullptr, "patch_embed");
  check(cuda::add_periodic_rows_bf16(a.x, t.pos, V * gg, gg, D, s), "pos_embed");

  for (int64_t l = 0; l < m.sam_layers; ++l) {
    const DeviceSamLayer& L = I.sam[static_cast<size_t>(l)];
    const int win = static_cast<int>(m.is_global_layer(l) ? g : m.window_size);
    const int64_t per = (g + win - 1) / win, seqs = V * per * per;
    const int64_t rows = seqs * win * win;
    check(k::layer_norm_bf16(a.x, L.norm1_w, L.norm1_b, a.normed, V * gg, D, kEps, s), "norm1");
    // A global layer's "window" is the whole view: its partition is the
    // identity, and the projection adds the residual itself.
    const bool whole = win == g;
    if (!whole)
      check(cuda::window_partition_bf16(a.normed, a.win, V, static_cast<int>(g), win, D, s),
            "window_partition");
    gemm(I.sam_qkv, whole ? a.normed : a.win, L.qkv_w, L.qkv_b, nullptr, a.qkv, rows, nullptr,
         "attn.qkv");
    // The window's (or view's) tokens attend to each other with the
    // decomposed relative-position bias; q, k and v are column blocks of qkv.
    k::AttentionExtras ax;
    ax.q = a.qkv;
    ax.k = a.qkv + D;
    ax.v = a.qkv + 2 * D;
    ax.q_stride = ax.kv_stride = 3 * D;
    ax.out_stride = D;
    ax.kv_heads = heads;
    ax.rel_h = t.rel_h[static_cast<size_t>(l)];
    ax.rel_w = t.rel_w[static_cast<size_t>(l)];
    ax.hn = ax.wn = win;
    ax.view_count = view_count;
    ax.seqs_per_view = static_cast<int>(per * per);
    k::AttentionParams at;
    at.max_seqs = static_cast<int>(seqs);
    at.max_seqlen = win * win;
    at.num_heads = heads;
    at.head_dim = hd;
    at.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    at.out = a.attn;
    at.stream = s;
    at.extras = &ax;
    check(k::run_attention(at), "SAM attention");
    if (whole) {
      gemm(I.sam_proj_res, a.attn, L.proj_w, L.proj_b, a.x, a.x, rows, a.win, "attn.proj");
    } else {
      gemm(I.sam_proj, a.attn, L.proj_w, L.proj_b, nullptr, a.win, rows, nullptr, "attn.proj");
      check(cuda::window_unpartition_add_bf16(a.x, a.win, V, static_cast<int>(g), win, D, s),
            "window_unpartition");
    }
    check(k::layer_norm_bf16(a.x, L.norm2_w, L.norm2_b, a.normed, V * gg, D, kEps, s), "norm2");
    gemm(I.lin1, a.normed, L.lin1_w, L.lin1_b, nullptr, a.mlp, V * gg, nullptr, "mlp.lin1");
    gemm(I.lin2, a.mlp, L.lin2_w, L.lin2_b, a.x, a.x, V * gg, a.normed, "mlp.lin2");
  }

  // Neck and downsampling, channels-last (LayerNorm2d = LayerNorm per position).
  const int64_t C = m.neck_channels, c1 = m.downsample_channels[0], E = m.encoder_hidden();
  gemm(I.neck1, a.x, I.neck1_w, nullptr, nullptr, a.y1, V * gg, nullptr, "neck conv1");
  check(k::layer_norm_bf16(a.y1, I.neck_ln1_w, I.neck_ln1_b, a.y2, V * gg, C, kEps, s),
        "neck layer_norm1");
  check(cuda::conv3x3_im2col_bf16(a.y2, V, static_cast<int>(g), static_cast<int>(g),
                                  static_cast<int>(C), 1, a.cols, s),
        "neck conv2 im2col");
  gemm(I.neck2, a.cols, I.neck2_w, nullptr, nullptr, a.y1, V * gg, nullptr, "neck conv2");
  check(k::layer_norm_bf16(a.y1, I.neck_ln2_w, I.neck_ln2_b, a.y2, V * gg, C, kEps, s),
        "neck layer_norm2");
  check(cuda::conv3x3_im2col_bf16(a.y2, V, static_cast<int>(g), static_cast<int>(g),
                                  static_cast<int>(C), 2, a.cols, s),
        "downsample conv1 im2col");
  gemm(I.down1, a.cols, I.down1_w, nullptr, nullptr, a.d1, V * d.g2 * d.g2, nullptr,
       "downsample conv1");
  check(cuda::conv3x3_im2col_bf16(a.d1, V, static_cast<int>(d.g2), static_cast<int>(d.g2),
                                  static_cast<int>(c1), 2, a.cols, s),
        "downsample conv2 im2col");
  gemm(I.down2, a.cols, I.down2_w, nullptr, nullptr, a.d2, V * d.n, nullptr, "downsample conv2");

  // The encoder over [n image tokens | n learned queries] per view.
  const int64_t n = d.n, Ls = d.L, ehd = m.encoder_head_dim();
  const int eh = static_cast<int>(m.encoder_heads), kvh = static_cast<int>(m.encoder_kv_heads);
  const int64_t qkv_n = (eh + 2 * kvh) * ehd, inter = m.encoder_intermediate_size;
  check(cuda::copy_view_rows_bf16(a.d2, n, 0, a.seq, Ls, 0, n, V, E, s), "image tokens");
  check(cuda::copy_view_rows_bf16(t.queries, 0, 0, a.seq, Ls, n, n, V, E, s), "queries");
  for (const DeviceEncoderLayer& L : I.enc) {
    check(k::rms_norm_bf16(a.seq, L.norm1, a.hn, V * Ls, E, kEps, s), "input_layernorm");
    gemm(I.enc_qkv, a.hn, L.qkv_w, L.qkv_b, nullptr, a.eqkv, V * Ls, nullptr, "q/k/v_proj");
    check(cuda::rotary_rows_bf16(a.eqkv, qkv_n, V * Ls, static_cast<int>(Ls), eh + kvh,
                                 static_cast<int>(ehd), t.cos, t.sin, s),
          "rotary");
    // One sequence a view, [image tokens | queries]: grouped KV heads and the
    // prefix mask (image tokens see each other, query i the image and
    // queries up to i).
    k::AttentionExtras ax;
    ax.q = a.eqkv;
    ax.k = a.eqkv + eh * ehd;
    ax.v = a.eqkv + (eh + kvh) * ehd;
    ax.q_stride = ax.kv_stride = qkv_n;
    ax.out_stride = eh * ehd;
    ax.kv_heads = kvh;
    ax.prefix = static_cast<int>(n);
    ax.view_count = view_count;
    ax.seqs_per_view = 1;
    k::AttentionParams at;
    at.max_seqs = static_cast<int>(V);
    at.max_seqlen = static_cast<int>(Ls);
    at.num_heads = eh;
    at.head_dim = static_cast<int>(ehd);
    at.scale = 1.0f / std::sqrt(static_cast<float>(ehd));
    at.out = a.eo;
    at.stream = s;
    at.extras = &ax;
    check(k::run_attention(at), "encoder attention");
    gemm(I.enc_o, a.eo, L.o_w, nullptr, a.seq, a.seq, V * Ls, a.hn, "o_proj");
    check(k::rms_norm_bf16(a.seq, L.norm2, a.hn, V * Ls, E, kEps, s), "post_attention_layernorm");
    gemm(I.enc_gate_up, a.hn, L.gate_up_w, nullptr, nullptr, a.gu, V * Ls, nullptr, "gate/up_proj");
    check(
        k::silu_mul_bf16(a.gu, 2 * inter, a.gu + inter, 2 * inter, a.act, inter, V * Ls, inter, s),
        "silu");
    gemm(I.enc_down, a.act, L.down_w, nullptr, a.seq, a.seq, V * Ls, a.hn, "down_proj");
  }
  // The query rows only, the final norm, the projector.
  check(cuda::copy_view_rows_bf16(a.seq, Ls, n, a.qrows, n, 0, n, V, E, s), "query rows");
  check(k::rms_norm_bf16(a.qrows, I.enc_norm, a.qn, V * n, E, kEps, s), "norm");
  gemm(I.projector, a.qn, I.proj_w, I.proj_b, nullptr, static_cast<bf16*>(out), V * n, nullptr,
       "multi_modal_projector");

  if (tuning) I.ctx.save_cache();
}

}  // namespace dsocr2
