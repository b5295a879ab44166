#include "llava_cuda_model.hpp"

#include "llava_kernels.hpp"
#include "siglip_cuda_model.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/model_context.hpp>
#include <encoder_kit/error.hpp>

#include <string>
#include <utility>

namespace llava_onevision {
namespace {

namespace k = encoder_kit::cuda;
using k::bf16;
using Epilogue = k::GemmPlan::Epilogue;

constexpr const char* kWho = "llava_onevision CUDA";

void check(int rc, const char* what) {
  k::throw_on_kit_failure(kWho, rc, what);
}

struct Activations {
  bf16 *features, *mid, *projected;
  void* tower;
  size_t tower_bytes;
  void* gemm_ws;
  size_t total;
};

Activations carve(const ModelConfig& c, const Capacity& cap, size_t tower_bytes, char* base) {
  const size_t r = static_cast<size_t>(cap.tower_rows(c));
  Activations a{};
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* ptr = base ? base + off : nullptr;
    off += k::align_up(bytes);
    return ptr;
  };
  a.features = reinterpret_cast<bf16*>(take(r * static_cast<size_t>(c.vision.hidden_size) * 2));
  a.mid = reinterpret_cast<bf16*>(take(r * static_cast<size_t>(c.text_hidden_size) * 2));
  a.projected = reinterpret_cast<bf16*>(take(r * static_cast<size_t>(c.text_hidden_size) * 2));
  a.tower_bytes = tower_bytes;
  a.tower = take(tower_bytes);
  a.gemm_ws = take(k::GemmPlan::workspace_bytes());
  a.total = off;
  return a;
}

siglip::Capacity tower_capacity(const ModelConfig& c, const Capacity& cap) {
  return {cap.tiles, cap.tower_rows(c)};
}

}  // namespace

struct CudaModel::Impl {
  Options o;
  std::unique_ptr<siglip::CudaModel> tower;
  k::DeviceWeights weights;
  const bf16 *p1_w = nullptr, *p1_b = nullptr, *p2_w = nullptr, *p2_b = nullptr;
  const bf16* newline = nullptr;
  Capacity planned;
  k::GemmPlan proj1, proj2;   // m = tower rows
  k::ModelContext ctx{kWho};  // last member: its handle is destroyed first

  void plan_products(const Capacity& cap) {
    const ModelConfig& c = o.model;
    const int64_t rows = cap.tower_rows(c), t = c.text_hidden_size;
    check(proj1.initialize(rows, t, c.vision.hidden_size, Epilogue::BiasGelu, false),
          "planning linear_1");
    check(proj2.initialize(rows, t, t, Epilogue::Bias, false), "planning linear_2");
    ctx.planned({&proj1, &proj2});
    planned = cap;
  }

  size_t tower_bytes(const Capacity& cap) const {
    return tower->workspace_bytes(tower_capacity(o.model, cap));
  }
};

CudaModel::CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max,
                     const std::string& tuning_cache, std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = o;
  const ModelConfig& c = o.model;
  if (c.text_hidden_size % 8 != 0)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                      "llava_onevision CUDA: text_hidden_size must be a multiple of 8 (16-byte "
                      "bf16 rows), got " +
                          std::to_string(c.text_hidden_size));
  m.tower = std::make_unique<siglip::CudaModel>(w.tower_options, w.tower, device_index,
                                                tower_capacity(c, max), tuning_cache, warn);
  m.ctx.select_device(device_index);
  m.weights.add(&m.p1_w, w.proj1_w);
  m.weights.add(&m.p1_b, w.proj1_b);
  m.weights.add(&m.p2_w, w.proj2_w);
  m.weights.add(&m.p2_b, w.proj2_b);
  m.weights.add(&m.newline, w.newline);
  m.weights.upload(kWho);
  m.ctx.open(device_index, tuning_cache, "llava_onevision", std::move(warn));
  m.plan_products(max);
}

CudaModel::~CudaModel() = default;

size_t CudaModel::workspace_bytes(const Capacity& cap) const {
  return carve(impl_->o.model, cap, impl_->tower_bytes(cap), nullptr).total;
}

void CudaModel::forward(const Capacity& cap, const eg_tensor* buffers, void* output,
                        void* workspace, size_t workspace_bytes, void* stream, bool tune) {
  Impl& m = *impl_;
  const ModelConfig& c = m.o.model;
  auto s = static_cast<cudaStream_t>(stream);
  const Activations a = carve(c, cap, m.tower_bytes(cap), static_cast<char*>(workspace));
  m.ctx.check_workspace(a.total, workspace_bytes);
  const int64_t rows = cap.tower_rows(c);

  siglip::OutputPtrs tower_out;
  tower_out.last_hidden_state = a.features;
  m.tower->forward(tower_capacity(c, cap), buffers, tower_out, a.tower, a.tower_bytes, stream,
                   tune);

  const bool in_capture = m.ctx.capturing(s);
  if (cap.tiles > m.planned.tiles)
    m.ctx.grow_plan(in_capture, cap.tiles, "tiles", [&] { m.plan_products(cap); });
  m.ctx.tune_once(tune, in_capture, cap.tiles, [&] {
    m.ctx.tune(m.proj1, a.features, m.p1_w, m.p1_b, nullptr, a.mid, rows, a.gemm_ws, s,
               "tuning linear_1");
    m.ctx.tune(m.proj2, a.mid, m.p2_w, m.p2_b, nullptr, a.projected, rows, a.gemm_ws, s,
               "tuning linear_2");
  });
  if (!in_capture)
    for (k::GemmPlan* p : {&m.proj1, &m.proj2}) check(p->prepare(rows), "prepare");
  // The tuning above timed its candidates on the real features, and the
  // products below recompute from them, so the order is safe.
  m.ctx.run(m.proj1, a.features, m.p1_w, m.p1_b, nullptr, a.mid, rows, a.gemm_ws, s,
            "linear_1 + gelu");
  m.ctx.run(m.proj2, a.mid, m.p2_w, m.p2_b, nullptr, a.projected, rows, a.gemm_ws, s, "linear_2");
  check(cuda::pack_rows_bf16(
            a.projected, m.newline, static_cast<const int32_t*>(buffers[kPackSrc].data),
            static_cast<const float*>(buffers[kPackWeight].data), static_cast<bf16*>(output),
            cap.out_rows(c), kTaps, c.text_hidden_size, s),
        "packing (unpad, interpolate, image_newline)");
}

}  // namespace llava_onevision
