// `encgraph encode` end to end on the CPU: PNG and JPEG files written by the
// test are decoded, run through the toy plugin's preprocessing, and land in a
// safetensors file, one tensor per file, equal to running the same pixels
// through the embedding API directly.
#include "cli.hpp"
#include "host_test_support.hpp"
#include "safetensors_reader.hpp"
#include "test_images.hpp"

#include <doctest/doctest.h>
#include <stb/stb_image.h>

using namespace encgraph::host;
namespace fs = std::filesystem;

namespace {

// The same file through the embedding API: decoded with stb, made from pixels.
std::vector<float> direct(encgraph::Runtime& rt, const fs::path& p) {
  int w = 0, h = 0, c = 0;
  unsigned char* px = stbi_load(p.c_str(), &w, &h, &c, 3);
  REQUIRE(px);
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = h;
  d.width = w;
  d.frames = 1;
  d.pixels = px;
  std::vector<encgraph::Item> items;
  items.push_back(rt.make_item(d));
  stbi_image_free(px);
  return rt.execute(items).item_as_float(0);
}

}  // namespace

TEST_CASE("encode writes one tensor per PNG/JPEG file, equal to the embedding API's output") {
  host_test::TempDir dir;
  const fs::path png = dir / "a.png", jpg = dir / "b.jpg", out = dir / "out" / "e.safetensors";
  host_test::write_gradient(png, 84, 56);
  host_test::write_gradient(jpg, 28, 42, 0, true);
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const auto o = host_test::run(
      "encode", {"--config", config.string(), "-o", out.string(), png.string(), jpg.string()});
  INFO(o.log);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("wrote 2 embeddings (30 rows of 8, f32)") != std::string::npos);

  const auto st = host_test::read_safetensors(out);
  CHECK(st.header.size() == 3);  // two tensors and the metadata
  CHECK(st.header["__metadata__"]["plugin"] == "toy");
  CHECK(st.header["__metadata__"]["config_digest"].get<std::string>().size() == 16);
  CHECK(st.header[png.string()]["shape"] == nlohmann::json({24, 8}));  // (56/14) x (84/14) rows
  CHECK(st.header[jpg.string()]["shape"] == nlohmann::json({6, 8}));
  CHECK(st.header[png.string()]["dtype"] == "F32");

  const HostConfig c = load_config(config, {});
  auto rt = make_runtime(c.runtime);
  rt->capture();
  CHECK(st.floats(png.string()) == direct(*rt, png));
  CHECK(st.floats(jpg.string()) == direct(*rt, jpg));

  // The pixels matter: a synthetic item of the same geometry differs.
  eg_item_desc synthetic{};
  synthetic.modality = EG_MODALITY_IMAGE;
  synthetic.height = 56;
  synthetic.width = 84;
  synthetic.frames = 1;
  std::vector<encgraph::Item> items;
  items.push_back(rt->make_item(synthetic));
  CHECK(rt->execute(items).item_as_float(0) != st.floats(png.string()));
}

TEST_CASE("encode takes glob patterns and writes a report when asked") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "x1.png", 28, 28);
  host_test::write_gradient(dir / "x2.png", 56, 28);
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const auto o =
      host_test::run("encode", {"-c", config.string(), "-o", (dir / "e.safetensors").string(),
                                "--report", (dir / "r.json").string(), (dir / "*.png").string()});
  INFO(o.log);
  REQUIRE(o.code == 0);
  const auto st = host_test::read_safetensors(dir / "e.safetensors");
  CHECK(st.header.contains((dir / "x1.png").string()));
  CHECK(st.header[(dir / "x2.png").string()]["shape"] == nlohmann::json({8, 8}));
  std::ifstream in(dir / "r.json");
  const auto report = nlohmann::json::parse(in);
  CHECK(report["command"] == "encode");
  CHECK(report["results"][0]["items"] == 2);
}

TEST_CASE("encode failures: unreadable image (exit 1), nowhere to write (exit 2)") {
  host_test::TempDir dir;
  const fs::path bad = dir.write("bad.png", "this is not a PNG");
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const auto o = host_test::run(
      "encode", {"-c", config.string(), "-o", (dir / "e.safetensors").string(), bad.string()});
  CHECK(o.code == 1);
  CHECK(o.log.find("image '" + bad.string() + "': not a PNG or JPEG image stb can read") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "e.safetensors"));

  host_test::write_gradient(dir / "ok.png", 28, 28);
  const auto none = host_test::run("encode", {"-c", config.string(), (dir / "ok.png").string()});
  CHECK(none.code == 2);
  CHECK(none.log.find("give -o FILE or set output.embeddings") != std::string::npos);
}
