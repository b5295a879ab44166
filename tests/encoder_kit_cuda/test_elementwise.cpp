// Norms, activations, rotary and row gather against float64 references, on
// shapes that take both the 16-byte vector paths and the scalar fallbacks.
#include "gpu_test_util.hpp"

#include <algorithm>
#include <numeric>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;

namespace {

struct Shape {
  int64_t rows, cols;
};
// 1280, 1152: Qwen's and SigLIP's hidden sizes; up to 2048 the row stays in
// registers (the widest such row, a partly used one, one of 8), 2056 takes the
// looped vector path; 100, 13: the scalar path.
const Shape kNormShapes[] = {{37, 1280}, {300, 1152}, {9, 2048}, {3, 2056},
                             {5, 72},    {3, 100},    {4, 13},   {1, 8}};

}  // namespace

GPU_TEST_CASE("rms_norm_bf16 matches Qwen2RMSNorm") {
  require_gpu();
  for (const Shape s : kNormShapes) {
    CAPTURE(s.rows);
    CAPTURE(s.cols);
    const size_t n = static_cast<size_t>(s.rows * s.cols);
    const auto x = random_bf16(n, 2.0f, 0.5f);
    const auto w = random_bf16(static_cast<size_t>(s.cols), 0.2f, 1.0f);
    DeviceBuffer<bf16> dx(n), dw(static_cast<size_t>(s.cols)), dy(n);
    dx.upload(x);
    dw.upload(w);
    dy.poison();
    const float eps = 1e-6f;
    CHECK_OK(k::rms_norm_bf16(dx.get(), dw.get(), dy.get(), s.rows, s.cols, eps, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref(n);
    for (int64_t r = 0; r < s.rows; ++r) {
      double ss = 0.0;
      for (int64_t c = 0; c < s.cols; ++c) ss += std::pow(to_f(x[r * s.cols + c]), 2);
      const double rstd = 1.0 / std::sqrt(ss / s.cols + eps);
      for (int64_t c = 0; c < s.cols; ++c)
        ref[r * s.cols + c] = to_f(w[c]) * round_bf(to_f(x[r * s.cols + c]) * rstd);
    }
    CHECK_CLOSE(compare(dy.download(), ref, 1e-2, 1e-3), 5e-3);
  }
}

GPU_TEST_CASE("layer_norm_bf16 matches torch.nn.LayerNorm, with and without bias") {
  require_gpu();
  for (const Shape s : kNormShapes) {
    for (const bool with_bias : {true, false}) {
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      CAPTURE(with_bias);
      const size_t n = static_cast<size_t>(s.rows * s.cols);
      // A large mean against a unit spread: a one-pass variance would cancel.
      const auto x = random_bf16(n, 1.0f, 40.0f);
      const auto w = random_bf16(static_cast<size_t>(s.cols), 0.3f, 1.0f);
      const auto b = random_bf16(static_cast<size_t>(s.cols), 0.5f);
      DeviceBuffer<bf16> dx(n), dw(w.size()), db(b.size()), dy(n);
      dx.upload(x);
      dw.upload(w);
      db.upload(b);
      dy.poison();
      const float eps = 1e-6f;
      CHECK_OK(k::layer_norm_bf16(dx.get(), dw.get(), with_bias ? db.get() : nullptr, dy.get(),
                                  s.rows, s.cols, eps, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<double> ref(n);
      for (int64_t r = 0; r < s.rows; ++r) {
        double mean = 0.0, var = 0.0;
        for (int64_t c = 0; c < s.cols; ++c) mean += to_f(x[r * s.cols + c]);
        mean /= s.cols;
        for (int64_t c = 0; c < s.cols; ++c) var += std::pow(to_f(x[r * s.cols + c]) - mean, 2);
        const double rstd = 1.0 / std::sqrt(var / s.cols + eps);
        for (int64_t c = 0; c < s.cols; ++c)
          ref[r * s.cols + c] =
              (to_f(x[r * s.cols + c]) - mean) * rstd * to_f(w[c]) + (with_bias ? to_f(b[c]) : 0.0);
      }
      CHECK_CLOSE(compare(dy.download(), ref, 1e-2, 2e-2), 1e-2);
    }
  }
}

GPU_TEST_CASE("silu_mul_bf16 reads gate and up out of a fused [gate | up] product") {
  require_gpu();
  // 3424: Qwen-7B's padded MLP width (vector path); 37: scalar path.
  for (const int64_t inter : {int64_t{3424}, int64_t{37}}) {
    CAPTURE(inter);
    const int64_t rows = 19, ld_in = 2 * inter, ld_y = inter + 8;
    const auto gu = random_bf16(static_cast<size_t>(rows * ld_in), 3.0f);
    DeviceBuffer<bf16> dgu(gu.size()), dy(static_cast<size_t>(rows * ld_y));
    dgu.upload(gu);
    dy.poison();
    CHECK_OK(k::silu_mul_bf16(dgu.get(), ld_in, dgu.get() + inter, ld_in, dy.get(), ld_y, rows,
                              inter, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref(dy.size(), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < inter; ++c) {
        const double g = to_f(gu[r * ld_in + c]), u = to_f(gu[r * ld_in + inter + c]);
        ref[r * ld_y + c] = round_bf(g / (1.0 + std::exp(-g))) * u;
      }
    const auto got = dy.download();
    CHECK_CLOSE(compare(got, ref, 1e-2, 1e-3, [&](size_t i) { return int64_t(i) % ld_y < inter; }),
                5e-3);
    // The padding columns of y are not part of the output: still poisoned.
    size_t touched = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = inter; c < ld_y; ++c) touched += std::isnan(to_f(got[r * ld_y + c])) ? 0 : 1;
    CHECK(touched == 0);
  }
}

GPU_TEST_CASE("gelu_bf16 (erf and tanh) and add_bf16") {
  require_gpu();
  for (const int64_t n : {int64_t{4096}, int64_t{1001}}) {
    CAPTURE(n);
    const auto x = random_bf16(static_cast<size_t>(n), 3.0f);
    const auto y = random_bf16(static_cast<size_t>(n), 1.0f);
    DeviceBuffer<bf16> dx(x.size()), dy(y.size()), dout(x.size());
    dx.upload(x);
    dy.upload(y);
    for (const bool tanh_form : {false, true}) {
      CAPTURE(tanh_form);
      dout.poison();
      CHECK_OK(k::gelu_bf16(dx.get(), dout.get(), n, tanh_form, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<double> ref(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = to_f(x[i]);
        ref[i] =
            tanh_form
                ? 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)))
                : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      }
      CHECK_CLOSE(compare(dout.download(), ref, 1e-2, 1e-3), 5e-3);
    }
    dout.poison();
    CHECK_OK(k::add_bf16(dx.get(), dy.get(), dout.get(), n, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = double(to_f(x[i])) + to_f(y[i]);
    CHECK_CLOSE(compare(dout.download(), ref, 1e-2, 1e-3), 5e-3);
  }
}

GPU_TEST_CASE("gather_rows_bf16 permutes rows and zeroes negative indices") {
  require_gpu();
  for (const int64_t cols : {int64_t{5120}, int64_t{12}}) {
    CAPTURE(cols);
    const int64_t rows = 50;
    const auto src = random_bf16(static_cast<size_t>(rows * cols));
    std::vector<int32_t> index(static_cast<size_t>(rows));
    std::iota(index.begin(), index.end(), 0);
    std::shuffle(index.begin(), index.end(), rng());
    index[3] = -1;
    index[17] = -1;
    DeviceBuffer<bf16> dsrc(src.size()), ddst(src.size());
    DeviceBuffer<int32_t> didx(index.size());
    dsrc.upload(src);
    didx.upload(index);
    ddst.poison();
    CHECK_OK(k::gather_rows_bf16(dsrc.get(), didx.get(), ddst.get(), rows, cols, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = ddst.download();
    size_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float want = index[r] < 0 ? 0.0f : to_f(src[index[r] * cols + c]);
        const float have = to_f(got[r * cols + c]);
        if (!(have == want)) ++wrong;  // NaN (unwritten) counts as wrong
      }
    CHECK(wrong == 0);
  }
}

GPU_TEST_CASE("rotary_bf16 rotates q and k as apply_rotary_pos_emb_vision, v untouched") {
  require_gpu();
  struct Case {
    int heads, head_dim;
    bool duplicated_table;  // cos/sin rows of head_dim (two halves) or head_dim/2
  };
  // 80: Qwen (8-wide path); 72: SigLIP so400m (4-wide); 12: 2-wide; 6: scalar.
  for (const Case cs : {Case{3, 80, false}, Case{3, 80, true}, Case{2, 72, true},
                        Case{4, 64, false}, Case{2, 12, false}, Case{1, 6, true}}) {
    CAPTURE(cs.heads);
    CAPTURE(cs.head_dim);
    CAPTURE(cs.duplicated_table);
    const int64_t tokens = 33;
    const int half = cs.head_dim / 2;
    const int64_t stride = cs.duplicated_table ? cs.head_dim : half;
    const size_t n = static_cast<size_t>(tokens * 3 * cs.heads * cs.head_dim);
    const auto qkv = random_bf16(n);
    std::vector<float> cos_t(static_cast<size_t>(tokens * stride)), sin_t(cos_t.size());
    std::uniform_real_distribution<float> angle(-20.0f, 20.0f);
    for (int64_t t = 0; t < tokens; ++t)
      for (int d = 0; d < half; ++d) {
        const float a = angle(rng());
        for (int64_t copy = 0; copy < stride / half; ++copy) {
          cos_t[t * stride + copy * half + d] = std::cos(a);
          sin_t[t * stride + copy * half + d] = std::sin(a);
        }
      }
    DeviceBuffer<bf16> dqkv(n);
    DeviceBuffer<float> dcos(cos_t.size()), dsin(sin_t.size());
    dqkv.upload(qkv);
    dcos.upload(cos_t);
    dsin.upload(sin_t);
    CHECK_OK(k::rotary_bf16(dqkv.get(), tokens, cs.heads, cs.head_dim, dcos.get(), dsin.get(),
                            stride, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = dqkv.download();
    std::vector<double> ref = to_double(qkv);
    size_t v_changed = 0;
    for (int64_t t = 0; t < tokens; ++t)
      for (int which = 0; which < 3; ++which)
        for (int h = 0; h < cs.heads; ++h) {
          const size_t base = static_cast<size_t>(((t * 3 + which) * cs.heads + h) * cs.head_dim);
          if (which == 2) {
            for (int d = 0; d < cs.head_dim; ++d)
              v_changed += to_f(got[base + d]) == to_f(qkv[base + d]) ? 0 : 1;
            continue;
          }
          for (int d = 0; d < half; ++d) {
            const double x1 = to_f(qkv[base + d]), x2 = to_f(qkv[base + d + half]);
            const double c = cos_t[t * stride + d], s = sin_t[t * stride + d];
            ref[base + d] = x1 * c - x2 * s;
            ref[base + d + half] = x2 * c + x1 * s;
          }
        }
    CHECK(v_changed == 0);
    CHECK_CLOSE(compare(got, ref, 1e-2, 1e-2), 5e-3);
  }
}

GPU_TEST_CASE("element-wise launchers reject bad arguments") {
  require_gpu();
  DeviceBuffer<bf16> buf(64);
  const int bad = static_cast<int>(cudaErrorInvalidValue);
  CHECK(k::rms_norm_bf16(nullptr, buf.get(), buf.get(), 1, 8, 1e-6f, nullptr) == bad);
  CHECK(k::rotary_bf16(buf.get(), 1, 1, 7, nullptr, nullptr, 3, nullptr) == bad);
  CHECK(k::silu_mul_bf16(buf.get(), 4, buf.get(), 8, buf.get(), 8, 2, 8, nullptr) == bad);
  CHECK(std::string(k::last_error_detail()).find("ld_gate") != std::string::npos);
  CHECK(k::rms_norm_bf16(buf.get(), buf.get(), buf.get(), 0, 8, 1e-6f, nullptr) == 0);
}
