// The kit's ModelBackend (encoder_kit/model_backend.hpp), the backend of
// siglip, internvl and llava_onevision, over a stand-in plugin: the refusal of
// a build without kernels comes before the log line and any load, the log
// line's words, and dispatch of workspace_bytes() and forward() to the CPU
// functions (either cpu_workspace_bytes form) or to the CUDA model, which is
// made from the options, the weights and the tuning choices. No GPU needed.
#include <encoder_kit/error.hpp>
#include <encoder_kit/model_backend.hpp>

#include <encgraph/sdk/host.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace {

// A plugin whose CPU scratch does not depend on the weights.
namespace flat {

struct Options : encoder_kit::RunOptions {
  std::string config_path;
  float scale = 3.0f;
};
struct Weights {
  std::vector<float> values;
};
struct Capacity {
  int64_t rows = 0;
};

int loads = 0;  // load_weights calls

Weights load_weights(const Options& o, const encoder_kit::WeightSource&) {
  ++loads;
  return {{o.scale, 2.0f * o.scale}};
}
size_t cpu_workspace_bytes(const Options&, const Capacity& cap) {
  return static_cast<size_t>(cap.rows) * 4;
}
// Row i is scale * i: the untyped output reaches the CPU as f32.
void cpu_forward(const Options&, const Weights& w, const Capacity& cap, const eg_tensor*,
                 float* output, void*, size_t) {
  for (int64_t i = 0; i < cap.rows; ++i) output[i] = w.values[0] * static_cast<float>(i);
}

// How the last CUDA model was made.
struct Made {
  float scale = 0;
  size_t weight_count = 0;
  int device = -1;
  int64_t planned_rows = 0;
  std::string cache;
  bool has_warn = false;
} made;

struct CudaModel {
  CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max,
            const std::string& tuning_cache, std::function<void(const std::string&)> warn) {
    made = {o.scale, w.values.size(), device_index, max.rows, tuning_cache, bool(warn)};
  }
  size_t workspace_bytes(const Capacity& cap) const { return static_cast<size_t>(cap.rows) * 2; }
  // Writes -rows and whether it was asked to tune (1 or 0).
  void forward(const Capacity& cap, const eg_tensor*, void* output, void*, size_t, void*,
               bool tune) {
    static_cast<float*>(output)[0] = -static_cast<float>(cap.rows);
    static_cast<float*>(output)[1] = tune ? 1.0f : 0.0f;
  }
};

}  // namespace flat

// A plugin whose CPU scratch grows with its weights.
namespace sized {

struct Options : encoder_kit::RunOptions {
  std::string config_path;
};
struct Weights {
  std::vector<float> values;
};
struct Capacity {
  int64_t rows = 0;
};

Weights load_weights(const Options&, const encoder_kit::WeightSource&) {
  return {{1, 2, 3, 4, 5}};
}
size_t cpu_workspace_bytes(const Options&, const Weights& w, const Capacity& cap) {
  return w.values.size() * static_cast<size_t>(cap.rows);
}
// Writes the weight count.
void cpu_forward(const Options&, const Weights& w, const Capacity&, const eg_tensor*, float* output,
                 void*, size_t) {
  output[0] = static_cast<float>(w.values.size());
}

}  // namespace sized

// The host's log lines, for the test to read.
std::vector<std::string> logged;

void capture_log(void*, int32_t, const char*, const char* message) {
  logged.emplace_back(message);
}

// Sends the SDK's log (encgraph::sdk::host()) to `logged` from here on.
void capture_host_log() {
  static eg_host_api api{};
  api.struct_size = sizeof(api);
  api.log = capture_log;
  encgraph::sdk::host().attach(&api, "test");
  logged.clear();
}

std::string refusal_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const encoder_kit::Error& e) {
    CHECK(e.status() == EG_ERR_UNSUPPORTED);
    return e.what();
  }
  FAIL("no error thrown");
  return {};
}

}  // namespace

TEST_CASE("a backend without kernels refuses cuda before the log line and any load") {
  using Backend = encoder_kit::ModelBackend<flat::Options, encoder_kit::NoCuda>;
  static_assert(Backend::kDevices == EG_DEVICE_CPU);
  capture_host_log();
  flat::loads = 0;
  const flat::Options o;
  const std::string m = refusal_of(
      [&] { Backend("internvl", o, "a note", "", EG_DEVICE_CUDA, 0, flat::Capacity{8}); });
  CHECK(m == "internvl was built without its CUDA kernels; use device = \"cpu\"");
  CHECK(flat::loads == 0);
  CHECK(logged.empty());
}

TEST_CASE("on the CPU the backend logs, loads once and runs the plugin's CPU functions") {
  using Backend = encoder_kit::ModelBackend<flat::Options, encoder_kit::NoCuda>;
  capture_host_log();
  flat::loads = 0;
  flat::Options o;
  o.seed = 17;
  o.scale = 0.5f;
  Backend b("internvl", o, "2 of 4 layers", "", EG_DEVICE_CPU, 0, flat::Capacity{8});
  CHECK(flat::loads == 1);
  REQUIRE(logged.size() == 1);
  // "" means random weights: the line names them as the weight source does.
  CHECK(logged[0] ==
        "loading " + encoder_kit::WeightSource("random", 17).description() + " (2 of 4 layers)");

  CHECK(b.workspace_bytes(flat::Capacity{5}) == 20);
  std::vector<float> out(4, -1.0f);
  void* output = out.data();
  b.forward(flat::Capacity{3}, nullptr, output, nullptr, 0, nullptr, true);
  CHECK(out[0] == doctest::Approx(0.0f));
  CHECK(out[1] == doctest::Approx(0.5f));
  CHECK(out[2] == doctest::Approx(1.0f));
  CHECK(out[3] == doctest::Approx(-1.0f));  // past the capacity: untouched
}

TEST_CASE("a plugin's cpu_workspace_bytes may read the weights") {
  using Backend = encoder_kit::ModelBackend<sized::Options, encoder_kit::NoCuda>;
  const sized::Options o;
  Backend b("llava_onevision", o, "note", "random", EG_DEVICE_CPU, 0, sized::Capacity{1});
  CHECK(b.workspace_bytes(sized::Capacity{3}) == 15);
  float out = 0;
  void* output = &out;
  b.forward(sized::Capacity{1}, nullptr, output, nullptr, 0, nullptr, false);
  CHECK(out == doctest::Approx(5.0f));
}

TEST_CASE("with kernels the backend makes the CUDA model from the weights and runs it") {
  using Backend = encoder_kit::ModelBackend<flat::Options, flat::CudaModel>;
  static_assert(Backend::kDevices == (EG_DEVICE_CPU | EG_DEVICE_CUDA));
  capture_host_log();
  flat::loads = 0;
  flat::Options o;
  o.scale = 2.0f;
  o.tune_gemm = false;
  o.tuning_cache = "/unused";
  Backend b("siglip", o, "note", "", EG_DEVICE_CUDA, 1, flat::Capacity{64});
  CHECK(flat::loads == 1);
  CHECK(logged.size() == 1);

  CHECK(flat::made.scale == doctest::Approx(2.0f));
  CHECK(flat::made.weight_count == 2);
  CHECK(flat::made.device == 1);
  CHECK(flat::made.planned_rows == 64);
  CHECK(flat::made.cache == "off");  // tune_gemm off: the cache stays in memory
  CHECK(flat::made.has_warn);

  CHECK(b.workspace_bytes(flat::Capacity{5}) == 10);  // the CUDA model's, not the CPU's 20
  std::vector<float> out(2, 0.0f);
  void* output = out.data();
  b.forward(flat::Capacity{6}, nullptr, output, nullptr, 0, nullptr, true);
  CHECK(out[0] == doctest::Approx(-6.0f));
  CHECK(out[1] == doctest::Approx(1.0f));
}
