// Videos given as frame image files in a trace ("frames_files", "frames_glob"),
// end to end through `encgraph encode` on the CPU: the toy plugin and the small
// Qwen2.5-VL tower each write one tensor per video equal to the same frames
// passed through the embedding API directly (decoded here with stb, laid out
// frames x height x width x channels as eg_item_desc defines); changing one
// frame's pixels changes the rows; data-parallel ranks give the same rows; and
// a bad trace line is exit code 2 naming the trace file, the line and the frame.
#include "../plugin_test_support.hpp"
#include "cli.hpp"
#include "config.hpp"
#include "host_test_support.hpp"
#include "safetensors_reader.hpp"
#include "test_images.hpp"
#include "workload.hpp"

#include <doctest/doctest.h>
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <fstream>

using namespace encgraph::host;
namespace fs = std::filesystem;

namespace {

// `count` frames dir/name/0001.png ... in order.
std::vector<fs::path> write_clip(const fs::path& dir, const std::string& name, int count, int w,
                                 int h, int shift = 0) {
  fs::create_directories(dir / name);
  std::vector<fs::path> frames;
  for (int i = 1; i <= count; ++i) {
    char file[16];
    std::snprintf(file, sizeof file, "%04d.png", i);
    frames.push_back(dir / name / file);
    host_test::write_gradient(frames.back(), w, h, shift + i);
  }
  return frames;
}

// The oracle: the same frames through the embedding API, decoded with stb and
// concatenated frame after frame into one eg_item_desc.
std::vector<float> api_rows(encgraph::Runtime& rt, const std::vector<fs::path>& frames) {
  std::vector<uint8_t> pixels;
  int w = 0, h = 0;
  for (const auto& f : frames) {
    int c = 0;
    unsigned char* px = stbi_load(f.c_str(), &w, &h, &c, 3);
    REQUIRE(px);
    pixels.insert(pixels.end(), px, px + static_cast<size_t>(w * h * 3));
    stbi_image_free(px);
  }
  eg_item_desc d{};
  d.modality = EG_MODALITY_VIDEO;
  d.channels = 3;
  d.height = h;
  d.width = w;
  d.frames = static_cast<int64_t>(frames.size());
  d.pixels = pixels.data();
  std::vector<encgraph::Item> items;
  items.push_back(rt.make_item(d));
  return rt.execute(items).item_as_float(0);
}

// --set overrides that find the in-tree plugins and keep the repository clean.
std::vector<std::string> test_overrides(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> sets = {"runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]",
                                   "runtime.log_level=\"warn\"", "runtime.prefer_faster_path=false",
                                   "output.report=\"\""};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return sets;
}

fs::path config_file(const std::string& name) {
  return fs::path(EG_HOST_SOURCE_DIR) / "configs" / name;
}

// `encgraph encode --config <config> --trace <trace> -o <out>` with the overrides.
host_test::Outcome encode(const std::string& config, const fs::path& trace, const fs::path& out,
                          const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {
      "--config", config_file(config).string(), "--trace", trace.string(), "-o", out.string()};
  for (const auto& s : test_overrides(extra)) {
    args.push_back("--set");
    args.push_back(s);
  }
  return host_test::run("encode", args);
}

}  // namespace

TEST_CASE("toy: a video of PNG frames is encoded like the same pixels through the API") {
  host_test::TempDir dir;
  // 4 frames of 42x28: (28/14) x (42/14) x 4 = 24 rows. hidden = 600 makes the
  // toy read all 4 x 28 x 42 x 3 = 14112 pixel bytes (it takes row values from
  // the pixels in order), so every frame counts.
  const std::vector<std::string> hidden = {"plugin.config.hidden=600"};
  const auto a = write_clip(dir.path(), "a", 4, 42, 28);
  const auto b = write_clip(dir.path(), "b", 3, 28, 28, 10);
  const fs::path trace =
      dir.write("t.jsonl",
                "{\"modality\": \"video\", \"frames_files\": [\"a/0001.png\", \"a/0002.png\", "
                "\"a/0003.png\", \"a/0004.png\"], \"frames\": 4, \"id\": \"clip-a\"}\n"
                "{\"frames_glob\": \"b/*.png\", \"id\": \"clip-b\"}\n"
                "{\"file\": \"a/0001.png\", \"id\": \"still\"}\n");
  const fs::path out = dir / "e.safetensors";
  const auto o = encode("toy.toml", trace, out, hidden);
  INFO(o.log);
  REQUIRE(o.code == 0);
  INFO(o.out);
  CHECK(o.out.find("wrote 3 embeddings (42 rows of 600, f32; 'pooled': 3 rows of 600, f32)") !=
        std::string::npos);
  const auto st = host_test::read_safetensors(out);
  CHECK(st.header["clip-a"]["shape"] == nlohmann::json({24, 600}));
  CHECK(st.header["clip-b"]["shape"] == nlohmann::json({12, 600}));  // 2 x 2 x 3 frames
  CHECK(st.header["still"]["shape"] == nlohmann::json({6, 600}));

  const HostConfig c = load_config(config_file("toy.toml"), test_overrides(hidden));
  auto rt = make_runtime(c.runtime);
  rt->capture();
  const std::vector<float> before = st.floats("clip-a");
  CHECK(before == api_rows(*rt, a));
  CHECK(st.floats("clip-b") == api_rows(*rt, b));

  // The last frame's pixels reach the plugin: changing them changes the rows.
  host_test::write_gradient(a[3], 42, 28, 99);
  REQUIRE(encode("toy.toml", trace, out, hidden).code == 0);
  const auto changed = host_test::read_safetensors(out);
  CHECK(changed.floats("clip-a") != before);
  CHECK(changed.floats("clip-a") == api_rows(*rt, a));
  CHECK(changed.floats("clip-b") == st.floats("clip-b"));

  // Data-parallel ranks decode and make the items themselves: the same rows.
  const fs::path dp = dir / "dp.safetensors";
  auto dp_sets = hidden;
  dp_sets.push_back("runtime.data_parallel=[\"cpu\", \"cpu\"]");
  const auto ranks = encode("toy.toml", trace, dp, dp_sets);
  INFO(ranks.log);
  REQUIRE(ranks.code == 0);
  const auto dp_st = host_test::read_safetensors(dp);
  for (const char* id : {"clip-a", "clip-b", "still"}) {
    CAPTURE(id);
    CHECK(dp_st.floats(id) == changed.floats(id));
  }
}

TEST_CASE("qwen2_5_vl: a 4-frame video from files equals the same frames through the API") {
  REQUIRE_MESSAGE(fs::exists(fs::path(host_test::plugin_dir()) / "libencgraph_qwen2_5_vl.so"),
                  "build the qwen2_5_vl plugin");
  host_test::TempDir dir;
  // 84x56 frames: already a multiple of 28, so grid 2 x 4 x 6 and 2 x 2 x 3 = 12 rows.
  const auto frames = write_clip(dir.path(), "clip", 4, 84, 56);
  const fs::path trace = dir.write("t.jsonl", "{\"frames_glob\": \"clip/*.png\", \"id\": \"v\"}\n");
  const fs::path out = dir / "e.safetensors";
  const auto o = encode("qwen2_5_vl_small_cpu.toml", trace, out);
  INFO(o.log);
  REQUIRE(o.code == 0);
  const auto st = host_test::read_safetensors(out);
  CHECK(st.header["v"]["shape"] == nlohmann::json({12, 96}));
  CHECK(st.header["v"]["dtype"] == "F32");

  const HostConfig c = load_config(config_file("qwen2_5_vl_small_cpu.toml"), test_overrides());
  auto rt = make_runtime(c.runtime);
  rt->capture();
  const std::vector<float> before = st.floats("v");
  // BLAS results: equal up to fp32 summation order, which may depend on the
  // buffers' alignment and the CPU's kernels (docs/testing.md).
  CHECK(encgraph::test::rel_error(before, api_rows(*rt, frames)) < 1e-5);

  // The fourth frame is the second half of the second temporal patch: changing
  // it changes the rows.
  host_test::write_gradient(frames[3], 84, 56, 99);
  REQUIRE(encode("qwen2_5_vl_small_cpu.toml", trace, out).code == 0);
  const auto changed = host_test::read_safetensors(out).floats("v");
  CHECK(encgraph::test::rel_error(changed, before) > 1e-3);
  CHECK(encgraph::test::rel_error(changed, api_rows(*rt, frames)) < 1e-5);
}

TEST_CASE("frames_glob under a trace folder whose name holds glob characters") {
  host_test::TempDir tmp;
  const fs::path dir = tmp / "set[1]";
  const auto frames = write_clip(dir, "clip", 3, 28, 28);
  std::ofstream(dir / "t.jsonl") << "{\"frames_glob\": \"clip/*.png\", \"id\": \"v\"}\n";
  const auto items = read_trace(dir / "t.jsonl");
  REQUIRE(items.size() == 1);
  REQUIRE(items[0].frame_files.size() == 3);
  CHECK(items[0].frame_files[0] == frames[0].string());
}

TEST_CASE("bad video frame lines: exit code 2 naming the trace file, the line and the frame") {
  host_test::TempDir dir;
  write_clip(dir.path(), "a", 4, 42, 28);
  host_test::write_gradient(dir / "wide.png", 56, 28, 0);
  {
    std::vector<unsigned char> grey(42 * 28, 128);
    REQUIRE(stbi_write_png((dir / "grey.png").c_str(), 42, 28, 1, grey.data(), 42));
  }
  dir.write("notes.txt", "not an image");
  const std::string d = dir.path().string();
  const std::string four = "[\"a/0001.png\", \"a/0002.png\", \"a/0003.png\", \"a/0004.png\"]";
  struct Case {
    std::string line, expect;
  };
  const std::vector<Case> cases = {
      {"{\"frames_files\": [\"a/0001.png\", \"a/0009.png\"]}",
       "'frames_files': frame 2 of 2: image '" + d +
           "/a/0009.png' does not exist: check the path; every frame must be a PNG or JPEG file"},
      {"{\"frames_files\": [\"a/0001.png\", \"wide.png\"]}",
       "'frames_files': frame 2 of 2 ('" + d + "/wide.png') is 56x28 but frame 1 of 2 ('" + d +
           "/a/0001.png') is 42x28; every frame of a video must have the same size"},
      {"{\"frames_files\": [\"a/0001.png\", \"grey.png\"]}",
       "'frames_files': frame 2 of 2 ('" + d + "/grey.png') has 1 channels but frame 1 of 2 ('" +
           d + "/a/0001.png') has 3; every frame of a video must have the same channel count"},
      {"{\"frames_files\": [\"a/0001.png\", \"notes.txt\"]}",
       "'frames_files': frame 2 of 2: image '" + d + "/notes.txt' is not a PNG or JPEG image"},
      {"{\"modality\": \"video\", \"frames_files\": []}",
       "'frames_files' must be a non-empty array of frame image paths, got []"},
      {"{\"frames_files\": [\"a/0001.png\", 2]}", "'frames_files' must hold strings"},
      {"{\"frames_glob\": \"a/*.jpg\"}", "'frames_glob' \"a/*.jpg\" matches no file (looked for '" +
                                             d +
                                             "/a/*.jpg'; relative patterns are resolved "
                                             "against the trace's folder)"},
      {"{\"frames_glob\": 3}", "'frames_glob' must be a string"},
      {"{\"frames\": 3, \"frames_files\": " + four + "}",
       "'frames' = 3 but 'frames_files' gives 4 frame files; drop 'frames' (the files give the "
       "count) or make them agree"},
      {"{\"frames\": 5, \"frames_glob\": \"a/*.png\"}",
       "'frames' = 5 but 'frames_glob' gives 4 frame files"},
      {"{\"frames_files\": " + four + ", \"height\": 30}",
       "'height' = 30 disagrees with the frames' 28"},
      {"{\"modality\": \"image\", \"frames_files\": " + four + "}",
       "'frames_files' and 'frames_glob' give a video's frames; set \"modality\": \"video\""},
      {"{\"file\": \"a/0001.png\", \"frames_glob\": \"a/*.png\"}",
       "'file' is one image and 'frames_files' or 'frames_glob' a video's frames"},
      {"{\"frames_files\": " + four + ", \"frames_glob\": \"a/*.png\"}",
       "give a video's frames as 'frames_files' or 'frames_glob', not both"},
      {"{\"modality\": \"video\", \"frames\": 2, \"file\": \"a/0001.png\"}",
       "'file' is one image; give a video's frames as 'frames_files'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    // The bad line is the second: the message must point at it, not the first.
    const fs::path trace = dir.write("t.jsonl", "{\"frames_glob\": \"a/*.png\"}\n" + c.line + "\n");
    const auto o = encode("toy.toml", trace, dir / "e.safetensors");
    CHECK(o.code == 2);
    CHECK(o.log.find(trace.string() + ":2: " + c.expect) != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "e.safetensors"));
  }
}

TEST_CASE("a frame whose header reads but whose pixels do not: exit code 2 naming the frame") {
  host_test::TempDir dir;
  const auto frames = write_clip(dir.path(), "a", 2, 42, 28);
  // Keep the PNG header (the trace check reads only that), drop the pixel data.
  fs::resize_file(frames[1], 40);
  const fs::path trace = dir.write("t.jsonl", "{\"frames_glob\": \"a/*.png\", \"id\": \"v\"}\n");
  const auto o = encode("toy.toml", trace, dir / "e.safetensors");
  CHECK(o.code == 2);
  CHECK(o.log.find("frame 2 of 2: image '" + frames[1].string() + "' cannot be decoded (") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "e.safetensors"));
}

TEST_CASE("encode takes image files or --trace, not both") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "x.png", 28, 28, 0);
  const fs::path trace = dir.write("t.jsonl", "{\"file\": \"x.png\"}\n");
  const auto o = host_test::run(
      "encode", {"--config", config_file("toy.toml").string(), "--trace", trace.string(), "-o",
                 (dir / "e.safetensors").string(), (dir / "x.png").string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("encode takes image files or --trace FILE, not both") != std::string::npos);
}
