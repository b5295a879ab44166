// ABI 1.0 compatibility: abi10_plugin.c, compiled against the frozen v1.0
// header, in this (1.2) runtime. The 1.0 path: device-filled capture inputs
// (prepare_capture_inputs), one output "embeddings", output_tokens as the path's
// tokens, a whole-struct `*out = info` model_info copy. Graph replays, eager
// runs and results are checked against patch_means_reference.hpp.
#include "patch_means_reference.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kDir = ABI10_PLUGIN_DIR;

encgraph::RuntimeConfig config() {
  encgraph::RuntimeConfig cfg;
  cfg.plugin = "abi10";
  cfg.plugin_dirs = {kDir};
  cfg.device = "cpu";
  cfg.plugin_config = {{"scale", "2"}};
  cfg.poison_memory = true;  // rows nobody wrote show as NaN
  cfg.prefer_faster_path = false;
  return cfg;
}

eg_item_desc desc(const patch_means::Image& im) {
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = im.height;
  d.width = im.width;
  d.frames = 1;
  d.pixels = im.pixels.data();
  return d;
}

std::vector<patch_means::Image> images() {
  // 6, 1, 30, 20 and 1089 patches: the last is larger than the largest budget (1024).
  return {patch_means::random_image(16, 24, 1), patch_means::random_image(5, 9, 2),
          patch_means::random_image(40, 48, 3), patch_means::random_image(32, 40, 4),
          patch_means::random_image(264, 264, 5)};
}

// Runs `count` of the images and checks every row against the reference.
encgraph::Stats run_and_check(encgraph::RuntimeConfig cfg, size_t count,
                              encgraph::ExecuteMode mode = encgraph::ExecuteMode::Planned) {
  encgraph::Runtime rt(cfg);
  rt.capture();
  const std::vector<patch_means::Image> ims = images();
  std::vector<encgraph::Item> items;
  for (size_t i = 0; i < count; ++i) items.push_back(rt.make_item(desc(ims[i])));
  const encgraph::Result r = rt.execute(items, mode);
  REQUIRE(r.size() == count);
  REQUIRE(r.num_outputs() == 1);
  CHECK(r.output(0).name == "embeddings");
  for (size_t i = 0; i < count; ++i) {
    const std::vector<double> want = patch_means::reference(ims[i], 2.0);
    const std::vector<float> got = r.item_as_float(i);
    CAPTURE(i);
    REQUIRE(r.rows(i) * 4 == static_cast<int64_t>(want.size()));
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k)
      REQUIRE(got[k] == doctest::Approx(want[k]).epsilon(1e-5));
  }
  return rt.stats();
}

}  // namespace

TEST_CASE("the 1.0 plugin loads in the 1.2 runtime as a 1.0 plugin") {
  const encgraph::LoadedPlugin p = encgraph::load_plugin_file(kDir / "libencgraph_abi10.so");
  CHECK(p.name == "abi10");
  CHECK(p.abi_major == 1);
  CHECK(p.abi_minor == 0);
  CHECK(p.api->struct_size == EG_PLUGIN_API_V1_0_SIZE);
}

TEST_CASE("its description is normalised: one output, 'embeddings', a unit for its path") {
  encgraph::Runtime rt(config());
  REQUIRE(rt.outputs().size() == 1);
  CHECK(rt.outputs()[0].name == "embeddings");
  CHECK(rt.outputs()[0].width == 4);
  CHECK(rt.outputs()[0].dtype == EG_DTYPE_F32);
  CHECK(rt.outputs()[0].rows_per_item == 0);
  const eg_model_info& info = rt.model_info();
  CHECK(info.num_paths == 1);
  CHECK(info.out_hidden_size == 4);
  REQUIRE(info.path_units[0] != nullptr);
}

TEST_CASE("spec_for (ABI 1.2) gives a 1.0 plugin's item spec from a synthetic item") {
  encgraph::Runtime rt(config());
  for (const patch_means::Image& im : images()) {
    const eg_item_desc d = desc(im);
    const encgraph::Item item = rt.make_item(d);
    const eg_item_spec spec = rt.spec_for(d);
    CHECK(spec.input_size == item.spec().input_size);
    CHECK(spec.output_tokens == item.spec().output_tokens);
    CHECK(spec.frames == item.spec().frames);
    CHECK(spec.path_tokens[0] == spec.output_tokens);  // 1.0: the path counts output rows
  }
  CHECK_FALSE(rt.has_spec_for_desc());
}

TEST_CASE("graph replays give the reference values, every item a hit") {
  const encgraph::Stats s = run_and_check(config(), 4);
  CHECK(s.num_graphs > 0);
  CHECK(s.graph_hits == 4);
  CHECK(s.graph_misses == 0);
  // output_tokens counted as the path's tokens (its path_tokens[0] is 0).
  CHECK(s.real_tokens == 6 + 1 + 30 + 20);
}

TEST_CASE("an item larger than every budget runs eagerly, beside replayed ones") {
  const encgraph::Stats s = run_and_check(config(), 5);
  CHECK(s.graph_misses == 1);
  CHECK(s.graph_hits == 4);
  REQUIRE(s.paths.size() == 1);
  CHECK(s.paths[0].eager_by_reason[static_cast<int>(encgraph::EagerReason::TooLarge)] == 1);
}

TEST_CASE("with graphs off, and in eager mode, every batch runs eagerly with the same values") {
  encgraph::RuntimeConfig cfg = config();
  cfg.use_graphs = false;
  const encgraph::Stats off = run_and_check(cfg, 5);
  CHECK(off.graph_hits == 0);
  CHECK(off.graph_misses == 5);
  CHECK(off.batches_eager > 0);
  const encgraph::Stats eager = run_and_check(config(), 5, encgraph::ExecuteMode::Eager);
  CHECK(eager.graph_hits == 0);
}

TEST_CASE("its own config errors still reach the user") {
  encgraph::RuntimeConfig cfg = config();
  cfg.plugin_config = {{"colour", "red"}};
  try {
    encgraph::Runtime rt(cfg);
    FAIL("an unknown config key was accepted");
  } catch (const encgraph::Error& e) {
    CHECK(std::string(e.what()).find("unknown config key 'colour' (known: scale)") !=
          std::string::npos);
  }
}
