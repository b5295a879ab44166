#include "cuda_tower.hpp"

#include "spec.hpp"

#include <encoder_kit/cuda/plugin_host.hpp>
#include <encoder_kit/cuda/tuning_cache.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>

namespace qwen_vl {

CudaTower::CudaTower(const VisionConfig& config, int device_index, int64_t mlp)
    : c(config),
      who(std::string(config.spec->name) + " CUDA"),
      device(device_index),
      mlp_width(mlp) {
  check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
  if (c.head_dim() % 8 != 0 || c.head_dim() > 128)
    fail(EG_ERR_INVALID_ARGUMENT,  // a config the user can change: exit 2
         "the attention kernel needs head_dim (hidden_size / num_heads) a multiple of 8 up to "
         "128, got " +
             std::to_string(c.head_dim()));
}

CudaTower::~CudaTower() {
  if (handle) cublasLtDestroy(handle);
}

void CudaTower::require_fp8() const {
  if (!k::fp8_supported())
    fail(EG_ERR_INVALID_ARGUMENT,
         "precision = \"fp8_linear\" needs a GPU with FP8 tensor cores (compute capability 8.9 "
         "or later): set precision = \"bf16\"");
  if (c.hidden_size % 16 != 0)
    fail(EG_ERR_INVALID_ARGUMENT,
         "precision = \"fp8_linear\" needs hidden_size a multiple of 16 (the FP8 products' "
         "rule), got " +
             std::to_string(c.hidden_size));
}

void CudaTower::check(int rc, const char* what) const {
  k::throw_on_kit_failure(who.c_str(), rc, what);
}

void CudaTower::check_cuda(cudaError_t e, const char* what) const {
  k::throw_on_cuda_error(who.c_str(), e, what);
}

void CudaTower::fail(eg_status status, const std::string& message) const {
  encoder_kit::fail(status, who + ": " + message);
}

void CudaTower::start(const Options& o, const Weights& w, Warn warn) {
  upload(w);
  const std::string tuning_cache = o.tune_gemm ? o.tuning_cache : std::string("off");
  const cublasStatus_t st = cublasLtCreate(&handle);
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(EG_ERR_DEVICE, std::string("cublasLtCreate: ") + cublasLtGetStatusString(st));
  gemm_cache =
      k::open_plugin_gemm_tuning_cache(device, tuning_cache, c.spec->name, std::move(warn));
  plan_products(std::max<int64_t>(o.max_budget * c.merge_unit(), c.merge_unit()));
}

void CudaTower::plan_products(int64_t patches) {
  const int64_t d = c.hidden_size, md = d * c.merge_unit();
  const int64_t tokens = std::max<int64_t>(patches / c.merge_unit(), 1);
  check(patch.initialize(patches, d, c.patch_dim(),
                         c.spec->patch_bias ? Epilogue::Bias : Epilogue::None, false),
        "planning patch_embed");
  check(
      qkv.initialize(patches, 3 * d, d, c.attention_bias ? Epilogue::Bias : Epilogue::None, false),
      "planning attn.qkv");
  check(
      proj.initialize(patches, d, d, c.spec->block_biases ? Epilogue::Bias : Epilogue::None, true),
      "planning attn.proj");
  const std::array<k::GemmPlan*, 2> mlp = plan_mlp(patches);
  if (c.spec->outputs == Outputs::Downsample) {
    // The downsample Conv2d over each unit's rows, then the merger's bias-free proj.
    check(merge1.initialize(tokens, c.out_hidden_size, md, Epilogue::Bias, false),
          "planning downsample");
    check(merge2.initialize(tokens, c.out_hidden_size, c.out_hidden_size, Epilogue::None, false),
          "planning merger proj");
  } else {
    // nn.GELU() in the mergers: the exact (erf) form.
    check(merge1.initialize(tokens, md, md, Epilogue::BiasGelu, false), "planning merger fc1");
    check(merge2.initialize(tokens, c.out_hidden_size, md, Epilogue::Bias, false),
          "planning merger fc2");
  }
  for (k::GemmPlan* g : {&patch, &qkv, &proj, mlp[0], mlp[1], &merge1, &merge2})
    g->set_tuning_cache(gemm_cache);
  planned_patches = patches;
  tuned.clear();
}

Activations CudaTower::carve(const Capacity& cap, char* base) const {
  const size_t p = static_cast<size_t>(cap.patches), d = static_cast<size_t>(c.hidden_size);
  const size_t mlp = static_cast<size_t>(mlp_width);
  Activations a{};
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* ptr = base ? base + off : nullptr;
    off += k::align_up(bytes);
    return reinterpret_cast<bf16*>(ptr);
  };
  a.x = take(p * d * 2);
  a.normed = take(p * d * 2);  // also a merger's [tokens, 4d] input
  a.qkv = take(3 * p * d * 2);
  a.attn = take(p * d * 2);
  // Not with mlp_kernel = "fused", whose kernel never writes it: 13.5 KiB a
  // patch row for Qwen2.5-VL's 7B tower.
  a.gate_up = gate_up_room ? take(2 * p * mlp * 2) : nullptr;
  a.act = take(p * mlp * 2);
  a.merged = take(static_cast<size_t>(cap.tokens * c.out_hidden_size) * 2);
  if (fp8_room) {
    a.q = reinterpret_cast<uint8_t*>(take(p * std::max(d, mlp)));
    a.q_scale = reinterpret_cast<float*>(take(p * 4));
  }
  a.gemm_ws = take(k::GemmPlan::workspace_bytes());
  a.total = off;
  return a;
}

void CudaTower::forward(const Capacity& cap, const eg_tensor* buffers, void* const* outputs,
                        int num_outputs, void* workspace, size_t workspace_bytes, void* stream,
                        bool tune_now) {
  Pass f{};
  f.cap = cap;
  f.a = carve(cap, static_cast<char*>(workspace));
  if (f.a.total > workspace_bytes)
    fail(EG_ERR_INVALID_ARGUMENT,
         "workspace of " + std::to_string(workspace_bytes) + " bytes is too small");
  if (num_outputs != 1 + c.num_deepstack())
    fail(EG_ERR_INVALID_ARGUMENT, "expected " + std::to_string(1 + c.num_deepstack()) +
                                      " outputs, got " + std::to_string(num_outputs));
  f.in = inputs(buffers);
  f.s = static_cast<cudaStream_t>(stream);
  f.p = cap.patches;
  f.tokens = cap.tokens;
  f.d = c.hidden_size;
  f.heads = static_cast<int>(c.num_heads);
  f.hd = static_cast<int>(c.head_dim());
  f.scale = 1.0f / std::sqrt(static_cast<float>(f.hd));
  f.gemm_ws = k::GemmPlan::workspace_bytes();

  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(f.s, &capturing), "cudaStreamIsCapturing");
  const bool in_capture = capturing != cudaStreamCaptureStatusNone;
  if (f.p > planned_patches) {
    if (in_capture)
      fail(EG_ERR_INTERNAL, "a graph of " + std::to_string(f.p) +
                                " patch rows was captured without its warm-up run");
    plan_products(f.p);
  }
  if (tune_now && !in_capture && !tuned.count(f.p)) {
    check(patch.tune(handle, f.in.pixels, patch_w, patch_b, nullptr, f.a.x, f.p, f.a.gemm_ws,
                     f.gemm_ws, f.s),
          "tune");
    tune_products(f.a, f.p, f.tokens, f.gemm_ws, f.s);
    tuned.insert(f.p);
    if (gemm_cache) gemm_cache->save();  // never fatal: warns once
  }
  run(f, outputs);
}

Inputs CudaTower::inputs(const eg_tensor* t) const {
  auto at = [&](int32_t b) { return b >= 0 ? static_cast<const void*>(t[b].data) : nullptr; };
  Inputs in{};
  in.pixels = static_cast<const bf16*>(at(buffers.pixel_rows));
  in.pos_index = static_cast<const int32_t*>(at(buffers.pos_index));
  in.pos_weight = static_cast<const float*>(at(buffers.pos_weight));
  in.cos = static_cast<const float*>(at(buffers.rope_cos));
  in.sin = static_cast<const float*>(at(buffers.rope_sin));
  in.cu_seqlens = static_cast<const int32_t*>(at(buffers.cu_seqlens));
  in.cu_windows = static_cast<const int32_t*>(at(buffers.cu_window_seqlens));
  in.token_index = static_cast<const int32_t*>(at(buffers.token_index));
  return in;
}

const std::vector<float>& CudaTower::pad_cols(const std::vector<float>& v, int64_t rows,
                                              std::deque<std::vector<float>>& store) const {
  const int64_t width = c.intermediate_size;
  if (mlp_width == width) return v;
  store.emplace_back(static_cast<size_t>(rows * mlp_width), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(v.begin() + r * width, v.begin() + (r + 1) * width,
              store.back().begin() + r * mlp_width);
  return store.back();
}

namespace {

// Each forward implements one combination of the forms, as tuned.
bool window_form(const Spec& s) {
  return s.attention == Attention::Windowed && s.pos_embed == PosEmbed::None &&
         s.norm == Norm::Rms && s.mlp == Mlp::GatedSilu && s.outputs == Outputs::Merger;
}
bool deepstack_form(const Spec& s) {
  return s.attention == Attention::Full && s.pos_embed == PosEmbed::Interpolated &&
         s.norm == Norm::Layer && s.mlp == Mlp::GeluTanh && s.outputs == Outputs::Deepstack;
}
bool downsample_form(const Spec& s) {
  return s.attention == Attention::Full && s.pos_embed == PosEmbed::Bicubic &&
         s.norm == Norm::Rms && s.mlp == Mlp::GatedSilu && s.outputs == Outputs::Downsample &&
         s.post_conv_norm && !s.block_biases && s.mlp_out_width;
}

}  // namespace

void require_cuda_forward(const Spec& s) {
  if (!window_form(s) && !deepstack_form(s) && !downsample_form(s))
    encoder_kit::fail(EG_ERR_UNSUPPORTED,
                      std::string(s.name) + ": no CUDA forward implements this tower's forms");
}

std::unique_ptr<CudaModel> make_cuda_model(const Options& o, const Weights& w, int device_index,
                                           Warn warn) {
  require_cuda_forward(o.spec());
  if (window_form(o.spec())) return make_window_tower(o, w, device_index, std::move(warn));
  if (downsample_form(o.spec())) return make_downsample_tower(o, w, device_index, std::move(warn));
  return make_deepstack_tower(o, w, device_index, std::move(warn));
}

}  // namespace qwen_vl
