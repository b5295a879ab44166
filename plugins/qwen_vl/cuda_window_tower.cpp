// Qwen2.5-VL's forward on CUDA (Attention::Windowed, Norm::Rms,
// Mlp::GatedSilu, one merger): cuBLASLt products with fused bias, residual add
// and GELU, the MLP's gate/up product with SiLU-mul in its epilogue on Hopper
// (gemm_sm90.cu; cuBLASLt and a SiLU-mul pass elsewhere or where faster),
// fused RMSNorm, rotary, variable-length flash attention over frames and
// windows, and a row gather for the inverse window order. With precision =
// "fp8_linear" the blocks' qkv, gate/up and down products run in FP8.
#include "cuda_tower.hpp"
#include "layout.hpp"
#include "spec.hpp"

#include <encoder_kit/cuda/form_timing.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace qwen_vl {
namespace {

// The MLP width on the device, padded to whole blocks of kGateUpBlock features
// with zero rows of gate/up and zero columns of down (silu(0) * 0 = 0 adds
// nothing). gate/up's weights are stored blocked (block_gate_up_rows: 128 gate
// rows, then the same features' up rows), the layout the fused kernel reads;
// cuBLASLt's product in that layout is SiLU·mul'd block by block. 3420 -> 3456
// also keeps cuBLASLt's down projection off K = 3420, which it runs at about a
// quarter of the speed (bench/kernels/EXPERIMENTS.md).
int64_t padded_intermediate(const VisionConfig& c) {
  return (c.intermediate_size + k::kGateUpBlock - 1) / k::kGateUpBlock * k::kGateUpBlock;
}

// The forms of norm2 + gate/up + SiLU·mul (MlpKernel names them), in the order
// "auto" times them; the names are the tuning cache's.
enum class MlpForm { Cublaslt, Fused, FusedNorm };
const std::vector<std::string> kMlpFormNames = {"cublaslt", "fused", "fused_norm"};

// The forms of norm1 + qkv (QkvKernel names them), in the order "auto" times
// them; the names are the tuning cache's.
enum class QkvForm { Cublaslt, FusedNorm };
const std::vector<std::string> kQkvFormNames = {"cublaslt", "fused_norm"};

// Whether a form needs room for cuBLASLt's [gate | up] product.
bool needs_gate_up(MlpKernel k) {
  return k == MlpKernel::Auto || k == MlpKernel::Cublaslt;
}

struct DeviceBlock {
  // qkv's rows with norm1's weight folded into their columns: norm1 runs
  // inside our kernel (rms_linear_bf16, QkvForm::FusedNorm) or as a norm of
  // unit weight before cuBLASLt's product.
  const bf16 *qkv_w, *qkv_b, *proj_w, *proj_b;
  // gate and up rows blocked (padded_intermediate), with norm2's weight folded
  // into their columns: the MLP's RMSNorm runs inside the fused kernel
  // (rms_gate_up_silu_mul_bf16, MlpForm::FusedNorm), or as a norm of unit
  // weight before the product (the other forms).
  const bf16 *gate_up_w, *gate_up_b;
  const bf16 *down_w, *down_b;
  // precision = "fp8_linear": qkv, gate/up and down (norms folded, gate/up
  // blocked, down padded) as e4m3 codes with a scale per output row; those
  // three bf16 weights above are then not uploaded (proj is).
  const uint8_t *qkv_q, *gate_up_q, *down_q;
  const float *qkv_s, *gate_up_s, *down_s;
};

class WindowTower final : public CudaTower {
 public:
  WindowTower(const Options& o, const Weights& w, int device_index, Warn warn);

 private:
  void run(const Pass& f, void* const* outputs) override;

  std::vector<DeviceBlock> blocks;
  const bf16* unit_norm = nullptr;  // hidden_size ones: norm1 and norm2, weights folded away
  const bf16 *ln_q = nullptr, *m0_w = nullptr, *m0_b = nullptr, *m2_w = nullptr, *m2_b = nullptr;
  k::GemmPlan gate_up, down;
  bool fp8 = false;  // precision = "fp8_linear"
  k::Fp8GemmPlan qkv8, gate_up8, down8;
  MlpKernel mlp_kernel = MlpKernel::Auto;
  bool sm90_kernels_run = false;        // this device runs our Hopper kernels (the fused forms)
  std::map<int64_t, MlpForm> mlp_form;  // "auto"'s timed choice per patch count
  QkvKernel qkv_kernel = QkvKernel::Auto;
  std::map<int64_t, QkvForm> qkv_form;  // "auto"'s timed choice per patch count

  void upload(const Weights& w) override {
    auto add = [&](const bf16** dst, const std::vector<float>* v) { weights.add(dst, *v); };
    // Zero-padded copies for the MLP width (see padded_intermediate).
    const int64_t inter = c.intermediate_size, dm = c.hidden_size;
    std::deque<std::vector<float>> padded;
    // A copy of a [rows, dm] weight with an RMSNorm's weight folded into its columns.
    auto folded = [&](const std::vector<float>& w, const std::vector<float>& norm) {
      padded.push_back(w);
      k::fold_norm_weight(padded.back().data(), static_cast<int64_t>(w.size()) / dm, dm,
                          norm.data());
      return &padded.back();
    };
    // norm: an RMSNorm weight to fold into the columns (weights), or null (biases).
    auto blocked = [&](const std::vector<float>& gate, const std::vector<float>& up, int64_t cols,
                       const std::vector<float>* norm) -> const std::vector<float>* {
      const int64_t rows = k::gate_up_blocked_rows(inter);
      padded.emplace_back(static_cast<size_t>(rows * cols));
      k::block_gate_up_rows(gate.data(), up.data(), inter, cols, padded.back().data());
      if (norm) k::fold_norm_weight(padded.back().data(), rows, cols, norm->data());
      return &padded.back();
    };
    add(&patch_w, &w.patch_embed_w);
    blocks.resize(w.blocks.size());
    for (size_t i = 0; i < w.blocks.size(); ++i) {
      const BlockWeights& b = w.blocks[i];
      DeviceBlock& d = blocks[i];
      const std::vector<float>* qkv_w = folded(b.qkv_w, b.norm1_w);
      const std::vector<float>* gate_up_w = blocked(b.fc1_w, b.up_w, dm, &b.norm2_w);
      const std::vector<float>* down_w = &pad_cols(b.fc2_w, dm, padded);
      const std::string at = "blocks." + std::to_string(i) + ".";
      if (fp8) {
        const int64_t mlp = padded_intermediate(c);
        weights.add_e4m3(&d.qkv_q, &d.qkv_s, *qkv_w, 3 * dm, at + "attn.qkv.weight");
        add(&d.proj_w, &b.proj_w);  // bf16: see fp8_proj_mlp
        weights.add_e4m3(&d.gate_up_q, &d.gate_up_s, *gate_up_w, 2 * mlp,
                         at + "mlp.gate_proj/up_proj.weight");
        weights.add_e4m3(&d.down_q, &d.down_s, *down_w, dm, at + "mlp.down_proj.weight");
      } else {
        add(&d.qkv_w, qkv_w);
        add(&d.proj_w, &b.proj_w);
        add(&d.gate_up_w, gate_up_w);
        add(&d.down_w, down_w);
      }
      add(&d.qkv_b, &b.qkv_b);
      add(&d.proj_b, &b.proj_b);
      add(&d.gate_up_b, blocked(b.fc1_b, b.up_b, 1, nullptr));
      add(&d.down_b, &b.fc2_b);
    }
    padded.emplace_back(static_cast<size_t>(dm), 1.0f);
    add(&unit_norm, &padded.back());
    add(&ln_q, &w.merger.norm_w);  // merger.ln_q, mlp.0, mlp.2
    add(&m0_w, &w.merger.fc1_w);
    add(&m0_b, &w.merger.fc1_b);
    add(&m2_w, &w.merger.fc2_w);
    add(&m2_b, &w.merger.fc2_b);
    weights.upload(who);
  }
  std::array<k::GemmPlan*, 2> plan_mlp(int64_t patches) override {
    const int64_t d = c.hidden_size, inter = padded_intermediate(c);
    check(gate_up.initialize(patches, 2 * inter, d, Epilogue::Bias, false), "planning gate/up");
    check(down.initialize(patches, d, inter, Epilogue::Bias, true), "planning down_proj");
    if (fp8) {  // the blocks' products as they run (the bf16 plans above stay idle)
      check(qkv8.initialize(patches, 3 * d, d, Epilogue::Bias), "planning attn.qkv in FP8");
      check(gate_up8.initialize(patches, 2 * inter, d, Epilogue::Bias), "planning gate/up in FP8");
      check(down8.initialize(patches, d, inter, Epilogue::Bias), "planning down_proj in FP8");
    }
    return {&gate_up, &down};
  }

  MlpForm mlp_form_for(int64_t p) const {
    switch (mlp_kernel) {
      case MlpKernel::Fused: return MlpForm::Fused;
      case MlpKernel::FusedNorm: return MlpForm::FusedNorm;
      case MlpKernel::Cublaslt: return MlpForm::Cublaslt;
      case MlpKernel::Auto: break;
    }
    if (!sm90_kernels_run) return MlpForm::Cublaslt;
    const auto it = mlp_form.find(p);
    if (it != mlp_form.end()) return it->second;
    // Untimed: the norm inside the fused kernel, the fastest of the three at
    // every size measured (bench_kernels --only mlp, H200, 256 to 65536 rows:
    // 0.5-6% ahead of the norm then the fused kernel, 12-31% ahead of cuBLASLt).
    return MlpForm::FusedNorm;
  }

  QkvForm qkv_form_for(int64_t p) const {
    switch (qkv_kernel) {
      case QkvKernel::FusedNorm: return QkvForm::FusedNorm;
      case QkvKernel::Cublaslt: return QkvForm::Cublaslt;
      case QkvKernel::Auto: break;
    }
    if (!sm90_kernels_run) return QkvForm::Cublaslt;
    const auto it = qkv_form.find(p);
    // Untimed: the norm and the tuned product, the form every GPU runs (the
    // norm inside gains 2-5% from 1024 rows up and loses at 256;
    // bench/kernels/EXPERIMENTS.md).
    return it != qkv_form.end() ? it->second : QkvForm::Cublaslt;
  }

  // norm1 and qkv, [p, d] residual rows x -> [p, 3d] qkv: one kernel, or the
  // norm (unit weight) and cuBLASLt's product.
  void norm_qkv(const Activations& a, const DeviceBlock& b, int64_t p, QkvForm form,
                cudaStream_t s) {
    const int64_t d = c.hidden_size;
    if (form == QkvForm::FusedNorm) {
      check(k::rms_linear_bf16(a.x, b.qkv_w, b.qkv_b, a.qkv, p, 3 * d, d, c.norm_eps, s),
            "norm1 and qkv");
      return;
    }
    check(k::rms_norm_bf16(a.x, unit_norm, a.normed, p, d, c.norm_eps, s), "norm1");
    check(qkv.run(handle, a.normed, b.qkv_w, b.qkv_b, nullptr, a.qkv, p, a.gemm_ws,
                  k::GemmPlan::workspace_bytes(), s),
          "qkv");
  }

  // The MLP's first half with its norm, [p, d] residual rows x -> [p, inter]
  // act: one kernel, or the norm, cuBLASLt's product and silu_mul.
  void norm_gate_up_silu(const Activations& a, const DeviceBlock& b, int64_t p, MlpForm form,
                         cudaStream_t s) {
    const int64_t d = c.hidden_size, inter = padded_intermediate(c), blk = k::kGateUpBlock;
    if (form == MlpForm::FusedNorm) {
      check(k::rms_gate_up_silu_mul_bf16(a.x, b.gate_up_w, b.gate_up_b, a.act, p, d, inter, inter,
                                         c.norm_eps, s),
            "norm2 and gate/up with SiLU-mul");
      return;
    }
    check(k::rms_norm_bf16(a.x, unit_norm, a.normed, p, d, c.norm_eps, s), "norm2");
    if (form == MlpForm::Fused) {
      check(k::gate_up_silu_mul_bf16(a.normed, b.gate_up_w, b.gate_up_b, a.act, p, d, inter, inter,
                                     s),
            "gate/up with SiLU-mul");
      return;
    }
    check(gate_up.run(handle, a.normed, b.gate_up_w, b.gate_up_b, nullptr, a.gate_up, p, a.gemm_ws,
                      k::GemmPlan::workspace_bytes(), s),
          "gate/up");
    // Blocked columns: each row's [gate | up] pairs of 128 are rows of a
    // [p * inter / 128, 256] matrix, and act's rows those of [p * inter / 128, 128].
    check(k::silu_mul_bf16(a.gate_up, 2 * blk, a.gate_up + blk, 2 * blk, a.act, blk,
                           p * (inter / blk), blk, s),
          "silu_mul");
  }

  // One FP8 product of a block on the operand in a.q: run, or with `tune`
  // its algorithms timed at this size instead (outside capture).
  void fp8_product(k::Fp8GemmPlan& plan, const Activations& a, const uint8_t* w, const float* sw,
                   const bf16* bias, bf16* out, int64_t p, bool tune, cudaStream_t s,
                   const char* what) {
    const size_t ws = k::GemmPlan::workspace_bytes();
    check(tune ? plan.tune(handle, a.q, a.q_scale, w, sw, bias, out, p, a.gemm_ws, ws, s)
               : plan.run(handle, a.q, a.q_scale, w, sw, bias, out, p, a.gemm_ws, ws, s),
          what);
  }

  // precision = "fp8_linear": norm1 and qkv as a row quantisation of x whose
  // scales carry the RMSNorm (norm1's weight is folded into qkv's columns),
  // then the FP8 product.
  void fp8_norm_qkv(const Activations& a, const DeviceBlock& b, int64_t p, bool tune,
                    cudaStream_t s) {
    const int64_t d = c.hidden_size;
    check(k::quantize_rows_e4m3(a.x, d, a.q, a.q_scale, p, d, c.norm_eps, s), "norm1 in FP8");
    fp8_product(qkv8, a, b.qkv_q, b.qkv_s, b.qkv_b, a.qkv, p, tune, s, "qkv in FP8");
  }

  // The rest of a block with its MLP in FP8: proj with its residual (bf16:
  // quantising attention's output costs more than the FP8 product saves, at
  // every size bench_kernels --only fp8 measures), norm2 and gate/up, SiLU·mul
  // quantised for down_proj, down_proj with its residual. With `tune` the
  // products are timed instead (x is overwritten: the forward that follows
  // recomputes it).
  void fp8_proj_mlp(const Activations& a, const DeviceBlock& b, int64_t p, bool tune,
                    cudaStream_t s) {
    const int64_t d = c.hidden_size, inter = padded_intermediate(c);
    const size_t ws = k::GemmPlan::workspace_bytes();
    check(tune ? proj.tune(handle, a.attn, b.proj_w, b.proj_b, a.x, a.x, p, a.gemm_ws, ws, s)
               : proj.run(handle, a.attn, b.proj_w, b.proj_b, a.x, a.x, p, a.gemm_ws, ws, s),
          "attn.proj");
    check(k::quantize_rows_e4m3(a.x, d, a.q, a.q_scale, p, d, c.norm_eps, s), "norm2 in FP8");
    fp8_product(gate_up8, a, b.gate_up_q, b.gate_up_s, b.gate_up_b, a.gate_up, p, tune, s,
                "gate/up in FP8");
    check(k::silu_mul_quantize_e4m3(a.gate_up, a.q, a.q_scale, p, inter, s), "SiLU-mul in FP8");
    // down_proj writes into attn (free once proj has read it), then adds to
    // x: cuBLASLt's FP8 products have no exact residual form (encoder_kit/cuda/fp8.hpp).
    fp8_product(down8, a, b.down_q, b.down_s, b.down_b, a.attn, p, tune, s, "down_proj in FP8");
    check(k::add_bf16(a.x, a.attn, a.x, p * d, s), "down_proj's residual");
  }

  // The fastest of `names`' forms, run(form index) each, at this size: the
  // choice stored in the tuning cache under `key`, or timed here as replays
  // of CUDA graphs in alternating rounds (time_forms: eager runs would time
  // the host's launches, where cuBLASLt's cost more, and had picked one
  // image's norm1 + qkv form the wrong way round). A form after the first must
  // be 2% faster to win (the qkv forms differ by 2-5%: timing noise must not
  // flip a choice between starts); one that fails to run or to capture is out
  // (the graphs could not hold it). choose_fastest stores the choice.
  size_t choose_form(const std::string& key, const std::vector<std::string>& names,
                     const std::function<void(size_t)>& run, cudaStream_t s) {
    constexpr int kRuns = 4, kRounds = 3;
    constexpr double kMargin = 1.02;
    std::vector<double> ms;  // every form's, measured on choose_fastest's first call
    auto measure_all = [&] {
      run(0);  // the first form's failure is the model's, reported as such
      k::FormTimes times;
      check(k::time_forms(
                names.size(),
                [&](size_t f) {
                  try {
                    run(f);
                    return 0;
                  } catch (...) {  // out of the running (inside a capture: ends it)
                    return static_cast<int>(cudaErrorUnknown);
                  }
                },
                s, kRuns, kRounds, times),
            "timing a layer's kernel forms");
      for (size_t f = 0; f < names.size(); ++f)
        ms.push_back(times.best_ms[f] >= 0.0f && times.captured[f]
                         ? times.best_ms[f] * (f == 0 ? 1.0 : kMargin)
                         : std::numeric_limits<double>::infinity());
    };
    auto time_ms = [&](size_t f) {
      if (ms.empty()) measure_all();
      return ms[f];
    };
    return encoder_kit::choose_fastest(gemm_cache.get(), key, names, time_ms);
  }

  // "auto": times the three MLP forms at this size (after gate_up's own
  // tuning), or takes the choice stored in the tuning cache for it. The key
  // holds everything the choice depends on besides the GPU and library
  // versions (the cache file's context).
  void choose_mlp(const Activations& a, int64_t p, cudaStream_t s) {
    if (mlp_kernel != MlpKernel::Auto || !sm90_kernels_run) return;
    const std::string key = "qwen-mlp:p=" + std::to_string(p) +
                            ",d=" + std::to_string(c.hidden_size) +
                            ",inter=" + std::to_string(padded_intermediate(c)) +
                            ",blk=" + std::to_string(k::kGateUpBlock) +
                            ",forms=norm+cublaslt+sm90v2+sm90rms,timed=graph";
    mlp_form[p] = static_cast<MlpForm>(choose_form(
        key, kMlpFormNames,
        [&](size_t f) { norm_gate_up_silu(a, blocks[0], p, static_cast<MlpForm>(f), s); }, s));
  }

  // "auto": norm1 + qkv's two forms at this size (after qkv's own tuning).
  void choose_qkv(const Activations& a, int64_t p, cudaStream_t s) {
    if (qkv_kernel != QkvKernel::Auto || !sm90_kernels_run) return;
    const std::string key = "qwen-qkv:p=" + std::to_string(p) +
                            ",d=" + std::to_string(c.hidden_size) +
                            ",forms=norm+cublaslt+sm90rmslinear,timed=graph";
    qkv_form[p] = static_cast<QkvForm>(choose_form(
        key, kQkvFormNames,
        [&](size_t f) { norm_qkv(a, blocks[0], p, static_cast<QkvForm>(f), s); }, s));
  }

  void tune_products(const Activations& a, int64_t p, int64_t tokens, size_t ws,
                     cudaStream_t s) override {
    const DeviceBlock& b = blocks[0];
    if (fp8) {
      // The FP8 products timed on the first block's weights, their operands
      // made as the forward makes them (from the patch embedding's rows in x).
      fp8_norm_qkv(a, b, p, /*tune=*/true, s);
      fp8_proj_mlp(a, b, p, /*tune=*/true, s);
      check(merge1.tune(handle, a.normed, m0_w, m0_b, nullptr, a.attn, tokens, a.gemm_ws, ws, s),
            "tune");
      check(merge2.tune(handle, a.attn, m2_w, m2_b, nullptr, a.merged, tokens, a.gemm_ws, ws, s),
            "tune");
      return;
    }
    check(qkv.tune(handle, a.normed, b.qkv_w, b.qkv_b, nullptr, a.qkv, p, a.gemm_ws, ws, s),
          "tune");
    choose_qkv(a, p, s);
    check(proj.tune(handle, a.attn, b.proj_w, b.proj_b, a.normed, a.normed, p, a.gemm_ws, ws, s),
          "tune");
    if (needs_gate_up(mlp_kernel))  // else cuBLASLt's gate/up never runs (nor has room)
      check(gate_up.tune(handle, a.normed, b.gate_up_w, b.gate_up_b, nullptr, a.gate_up, p,
                         a.gemm_ws, ws, s),
            "tune");
    choose_mlp(a, p, s);
    check(down.tune(handle, a.act, b.down_w, b.down_b, a.normed, a.normed, p, a.gemm_ws, ws, s),
          "tune");
    check(merge1.tune(handle, a.normed, m0_w, m0_b, nullptr, a.attn, tokens, a.gemm_ws, ws, s),
          "tune");
    check(merge2.tune(handle, a.attn, m2_w, m2_b, nullptr, a.merged, tokens, a.gemm_ws, ws, s),
          "tune");
  }
};

WindowTower::WindowTower(const Options& o, const Weights& w, int device_index, Warn warn)
    : CudaTower(o.model, device_index, padded_intermediate(o.model)),
      fp8(o.precision == Precision::Fp8Linear),
      mlp_kernel(o.mlp_kernel),
      qkv_kernel(o.qkv_kernel) {
  if (fp8) {
    require_fp8();
    if (mlp_kernel != MlpKernel::Auto || qkv_kernel != QkvKernel::Auto)
      fail(EG_ERR_INVALID_ARGUMENT,
           "mlp_kernel and qkv_kernel choose among the bf16 forms; with precision = "
           "\"fp8_linear\" drop them");
  }
  gate_up_room = fp8 || needs_gate_up(mlp_kernel);
  fp8_room = fp8;
  // (hidden_size is a multiple of 8, the kernel's rule for K: head_dim is.)
  sm90_kernels_run = k::gate_up_silu_mul_supported();
  if ((mlp_kernel == MlpKernel::Fused || mlp_kernel == MlpKernel::FusedNorm) && !sm90_kernels_run)
    fail(EG_ERR_INVALID_ARGUMENT,
         std::string("mlp_kernel = \"") +
             (mlp_kernel == MlpKernel::Fused ? "fused" : "fused_norm") +
             "\" needs a GPU of compute capability "
             "9.0 (Hopper) and a driver that encodes tensor maps: set mlp_kernel to "
             "\"auto\" or \"cublaslt\"");
  if (qkv_kernel == QkvKernel::FusedNorm && !k::rms_linear_supported())
    fail(EG_ERR_INVALID_ARGUMENT,
         "qkv_kernel = \"fused_norm\" needs a GPU of compute "
         "capability 9.0 (Hopper) and a driver that encodes tensor maps: set "
         "qkv_kernel to \"auto\" or \"cublaslt\"");
  start(o, w, std::move(warn));
}

void WindowTower::run(const Pass& f, void* const* outputs) {
  const auto& [cap, a, in, s, p, tokens, d, heads, hd, scale, gemm_ws] = f;
  const bf16* pixels = in.pixels;
  const float *cos = in.cos, *sin = in.sin;
  const int32_t *cu_frames = in.cu_seqlens, *cu_windows = in.cu_windows;
  const int32_t* inverse = in.token_index;

  check(patch.run(handle, pixels, patch_w, nullptr, nullptr, a.x, p, a.gemm_ws, gemm_ws, s),
        "patch_embed");
  const std::vector<SeqBucket> buckets = full_attention_buckets(cap);
  const MlpForm mlp_form = mlp_form_for(p);
  const QkvForm qkv_form = qkv_form_for(p);
  for (int64_t i = 0; i < c.depth; ++i) {
    const DeviceBlock& b = blocks[static_cast<size_t>(i)];
    if (fp8)
      fp8_norm_qkv(a, b, p, /*tune=*/false, s);
    else
      norm_qkv(a, b, p, qkv_form, s);
    // Windows of up to 64 patches (the released models' 112-pixel windows) take
    // rotary inside the attention's loads; full attention and larger windows
    // rotate qkv in place first.
    const bool fused_rotary = !c.full_attention(i) && cap.max_window_patches <= 64;
    if (!fused_rotary) check(k::rotary_bf16(a.qkv, p, heads, hd, cos, sin, hd / 2, s), "rotary");
    if (c.full_attention(i)) {
      for (const SeqBucket& bk : buckets)
        check(
            k::varlen_attention_bf16(a.qkv, cu_frames + bk.first, static_cast<int>(bk.count),
                                     static_cast<int>(bk.max_seqlen), heads, hd, scale, a.attn, s),
            "full attention");
    } else if (fused_rotary) {
      check(k::varlen_attention_rotary_bf16(a.qkv, cu_windows, static_cast<int>(cap.windows),
                                            static_cast<int>(cap.max_window_patches), heads, hd,
                                            scale, cos, sin, hd / 2, a.attn, s),
            "window attention");
    } else {
      check(k::varlen_attention_bf16(a.qkv, cu_windows, static_cast<int>(cap.windows),
                                     static_cast<int>(cap.max_window_patches), heads, hd, scale,
                                     a.attn, s),
            "window attention");
    }
    if (fp8) {
      fp8_proj_mlp(a, b, p, /*tune=*/false, s);
      continue;
    }
    check(proj.run(handle, a.attn, b.proj_w, b.proj_b, a.x, a.x, p, a.gemm_ws, gemm_ws, s),
          "attn.proj");
    norm_gate_up_silu(a, b, p, mlp_form, s);
    check(down.run(handle, a.act, b.down_w, b.down_b, a.x, a.x, p, a.gemm_ws, gemm_ws, s),
          "down_proj");
  }
  // Merger: RMSNorm per patch; [patches, d] read as [tokens, 4d]; Linear+GELU; Linear.
  check(k::rms_norm_bf16(a.x, ln_q, a.normed, p, d, c.norm_eps, s), "merger.ln_q");
  check(merge1.run(handle, a.normed, m0_w, m0_b, nullptr, a.attn, tokens, a.gemm_ws, gemm_ws, s),
        "merger.mlp.0");
  check(merge2.run(handle, a.attn, m2_w, m2_b, nullptr, a.merged, tokens, a.gemm_ws, gemm_ws, s),
        "merger.mlp.2");
  check(k::gather_rows_bf16(a.merged, inverse, static_cast<bf16*>(outputs[0]), tokens,
                            c.out_hidden_size, s),
        "inverse window order");
}

}  // namespace

std::unique_ptr<CudaModel> make_window_tower(const Options& o, const Weights& w, int device_index,
                                             Warn warn) {
  return std::make_unique<WindowTower>(o, w, device_index, std::move(warn));
}

}  // namespace qwen_vl
