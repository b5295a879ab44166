// GemmPlan with a persistent tuning cache: a plan that finds its problems in
// the cache takes the stored algorithms without timing and computes the same
// results; a stored algorithm cuBLASLt rejects is retuned and overwritten.
#include "gpu_test_util.hpp"

#include <encoder_kit/cuda/tuning_cache.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;
using Ep = k::GemmPlan::Epilogue;

namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "encgraph-gemmcache-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

struct Problem {
  int64_t m, n, k;
  Ep ep;
  bool residual;
};

// Inputs of one problem on the device.
struct Inputs {
  DeviceBuffer<bf16> A, W, bias, res, C;
  explicit Inputs(const Problem& p)
      : A(static_cast<size_t>(p.m * p.k)),
        W(static_cast<size_t>(p.n * p.k)),
        bias(static_cast<size_t>(p.n)),
        res(static_cast<size_t>(p.m * p.n)),
        C(static_cast<size_t>(p.m * p.n)) {
    const float s = 1.0f / std::sqrt(std::sqrt(static_cast<float>(p.k)));
    A.upload(random_bf16(A.size(), s));
    W.upload(random_bf16(W.size(), s));
    bias.upload(random_bf16(bias.size(), 0.5f));
    res.upload(random_bf16(res.size()));
  }
};

struct Outcome {
  std::string choice;
  std::vector<bf16> C;
  int64_t timed = 0, from_cache = 0;
};

// Plans, tunes (through `cache`) and runs one problem.
Outcome tune_and_run(const Problem& p, Inputs& in,
                     const std::shared_ptr<encoder_kit::TuningCache>& cache) {
  LtHandle lt;
  DeviceBuffer<unsigned char> ws(k::GemmPlan::workspace_bytes());
  k::GemmPlan plan;
  CHECK_OK(plan.initialize(p.m, p.n, p.k, p.ep, p.residual));
  plan.set_tuning_cache(cache);
  const bf16* bias = p.ep == Ep::None ? nullptr : in.bias.get();
  const bf16* res = p.residual ? in.res.get() : nullptr;
  CHECK_OK(plan.tune(lt.h, in.A.get(), in.W.get(), bias, res, in.C.get(), p.m, ws.get(), ws.size(),
                     nullptr));
  in.C.poison();
  CHECK_OK(plan.run(lt.h, in.A.get(), in.W.get(), bias, res, in.C.get(), p.m, ws.get(), ws.size(),
                    nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  return {plan.choice_for(p.m), in.C.download(), plan.tunings_timed(), plan.tunings_from_cache()};
}

std::shared_ptr<encoder_kit::TuningCache> open_cache(const std::string& dir,
                                                     std::vector<std::string>& warnings) {
  auto cache =
      k::open_gemm_tuning_cache(0, dir, [&](const std::string& m) { warnings.push_back(m); });
  REQUIRE(cache != nullptr);
  return cache;
}

const std::vector<Problem> kProblems = {
    {512, 1280, 1280, Ep::Bias, false},
    {300, 640, 1280, Ep::Bias, true},
    {128, 1280, 1176, Ep::None, false},
    {64, 512, 256, Ep::BiasGeluTanh, false},
};

}  // namespace

GPU_TEST_CASE("GemmPlan: the tuning cache's context names the GPU and library versions") {
  require_gpu();
  const std::string ctx = k::gemm_tuning_context(0);
  CHECK(ctx.rfind("gpu=", 0) == 0);
  for (const char* part : {";cc=", ";sms=", ";cudart=", ";cublaslt=", ";encgraph="})
    CHECK(ctx.find(part) != std::string::npos);
  CHECK(encoder_kit::valid_tuning_context(ctx));
}

GPU_TEST_CASE("GemmPlan: cached algorithms are taken without timing and give the same results") {
  require_gpu();
  ScratchDir dir;
  std::vector<std::string> warnings;
  std::vector<Outcome> first;
  std::vector<std::unique_ptr<Inputs>> inputs;  // DeviceBuffer does not move
  {
    auto cache = open_cache(dir.path, warnings);
    for (const Problem& p : kProblems) {
      inputs.push_back(std::make_unique<Inputs>(p));
      first.push_back(tune_and_run(p, *inputs.back(), cache));
      CHECK(first.back().timed == 1);
      CHECK(first.back().from_cache == 0);
      CHECK_FALSE(first.back().choice.empty());
    }
    CHECK(cache->size() == kProblems.size());
    REQUIRE(cache->save());
  }
  auto cache = open_cache(dir.path, warnings);  // a fresh process would see the same file
  CHECK(cache->size() == kProblems.size());
  for (size_t i = 0; i < kProblems.size(); ++i) {
    CAPTURE(i);
    const Outcome again = tune_and_run(kProblems[i], *inputs[i], cache);
    CHECK(again.timed == 0);
    CHECK(again.from_cache == 1);
    CHECK(again.choice == first[i].choice);
    REQUIRE(again.C.size() == first[i].C.size());
    double worst = 0.0;
    for (size_t j = 0; j < again.C.size(); ++j)
      worst =
          std::max(worst, std::fabs(static_cast<double>(to_f(again.C[j]) - to_f(first[i].C[j]))));
    CHECK(worst <= 1e-6);  // the same algorithm on the same inputs
  }
  CHECK(warnings.empty());
}

GPU_TEST_CASE("GemmPlan: a stored algorithm cuBLASLt rejects is retuned and overwritten") {
  require_gpu();
  ScratchDir dir;
  std::vector<std::string> warnings;
  const Problem p = kProblems[0];
  Inputs in(p);
  auto cache = open_cache(dir.path, warnings);
  const Outcome good = tune_and_run(p, in, cache);
  REQUIRE(cache->save());
  // Every stored algorithm replaced by one no cuBLASLt knows (a consistent file).
  encoder_kit::TuningFile file;
  {
    std::ifstream f(cache->path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    std::string why;
    bool stale = false;
    REQUIRE(encoder_kit::parse_tuning_file(text, file, why, stale));
  }
  for (auto& entry : file.entries) entry.second = std::string(128, 'f') + ":0";
  std::ofstream(cache->path(), std::ios::binary) << encoder_kit::serialize_tuning_file(file);

  auto reread = open_cache(dir.path, warnings);
  const Outcome retuned = tune_and_run(p, in, reread);
  CHECK(retuned.timed == 1);
  CHECK(retuned.from_cache == 0);
  REQUIRE(reread->save());
  auto third = open_cache(dir.path, warnings);
  const Outcome fixed = tune_and_run(p, in, third);
  CHECK(fixed.from_cache == 1);
  CHECK(fixed.choice == retuned.choice);
  CHECK_FALSE(good.choice.empty());
  CHECK(warnings.empty());
}
