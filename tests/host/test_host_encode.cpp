// `encgraph encode` end to end on the CPU: PNG and JPEG files written by the
// test are decoded, run through the toy plugin's preprocessing, and land in a
// safetensors file, one tensor per file, equal to running the same pixels
// through the embedding API directly.
#include "cli.hpp"
#include "embeddings.hpp"
#include "host_test_support.hpp"
#include "safetensors_reader.hpp"
#include "test_images.hpp"

#include <doctest/doctest.h>
#include <stb/stb_image.h>

using namespace encgraph::host;
namespace fs = std::filesystem;

using host_test::names;
using host_test::read_all;

namespace {

// Output o of the same file through the embedding API: decoded with stb, made
// from pixels.
std::vector<float> direct(encgraph::Runtime& rt, const fs::path& p, size_t o = 0) {
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
  return rt.execute(items).item_as_float(0, o);
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
  CHECK(o.out.find("wrote 2 embeddings (30 rows of 8, f32; 'pooled': 2 rows of 8, f32)") !=
        std::string::npos);

  // Two items of the toy's two outputs ("<id>" the first, "<id>/pooled"), and the metadata.
  const auto st = host_test::read_safetensors(out);
  CHECK(st.header.size() == 5);
  CHECK(st.header["__metadata__"]["outputs"] == "rows,pooled");
  CHECK(st.header[png.string() + "/pooled"]["shape"] == nlohmann::json({1, 8}));
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
  CHECK(st.floats(png.string() + "/pooled") == direct(*rt, png, 1));
  CHECK(st.floats(jpg.string() + "/pooled") == direct(*rt, jpg, 1));

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

TEST_CASE("encode failures: unreadable image, nowhere to write (exit 2)") {
  host_test::TempDir dir;
  const fs::path bad = dir.write("bad.png", "this is not a PNG");
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const auto o = host_test::run(
      "encode", {"-c", config.string(), "-o", (dir / "e.safetensors").string(), bad.string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("image '" + bad.string() +
                   "' is not a PNG or JPEG image (its first bytes are neither signature): only "
                   "PNG and JPEG are accepted") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "e.safetensors"));

  host_test::write_gradient(dir / "ok.png", 28, 28);
  const auto none = host_test::run("encode", {"-c", config.string(), (dir / "ok.png").string()});
  CHECK(none.code == 2);
  CHECK(none.log.find("give -o FILE or set output.embeddings") != std::string::npos);
}

namespace {}  // namespace

TEST_CASE("encode refuses outputs that are inputs or each other, before anything runs") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "a.png", 28, 28);
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const std::string png = read_all(dir / "a.png"), toml = read_all(config);
  fs::create_symlink(dir / "a.png", dir / "link.png");
  const std::string a = (dir / "a.png").string(), c = config.string();
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"-o", a, a}, "the embeddings output '" + a + "' is the image '" + a + "' (the same file)"},
      {{"-o", (dir / "link.png").string(), a}, "is the image '" + a + "'"},
      {{"-o", (dir / "e.st").string(), "--report", c, a}, "the report '" + c + "' is the config"},
      {{"-o", (dir / "e.st").string(), "--report", (dir / "." / "e.st").string(), a},
       "are the same file"},
      {{"-o", dir.path().string(), a}, "is a directory, not a regular file"},
  };
  for (const auto& k : cases) {
    CAPTURE(k.expect);
    std::vector<std::string> args = {"-c", c};
    args.insert(args.end(), k.args.begin(), k.args.end());
    const auto o = host_test::run("encode", args);
    CHECK(o.code == 2);
    CHECK(o.log.find(k.expect) != std::string::npos);
    CHECK(read_all(dir / "a.png") == png);
    CHECK(read_all(config) == toml);
    CHECK(names(dir.path()) == std::vector<std::string>{"a.png", "c.toml", "link.png"});
  }
}

TEST_CASE("a failed or empty run leaves a good existing embeddings file as it was") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "a.png", 28, 28);
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const fs::path out = dir / "e.safetensors";
  REQUIRE(host_test::run("encode",
                         {"-c", config.string(), "-o", out.string(), (dir / "a.png").string()})
              .code == 0);
  const std::string good = read_all(out);
  const auto before = names(dir.path());

  // A trace with no items, a trace that is a folder: refused, nothing written.
  const fs::path empty = dir.write("empty.jsonl", "\n");
  fs::create_directories(dir / "folder.jsonl");
  for (const fs::path& trace : {empty, dir / "folder.jsonl"}) {
    const auto o = host_test::run(
        "encode", {"-c", config.string(), "-o", out.string(), "--trace", trace.string()});
    CHECK(o.code == 2);
    CHECK(read_all(out) == good);
  }
  // An image whose header reads but whose pixels do not: found mid-run.
  host_test::write_gradient(dir / "b.png", 56, 56);
  fs::resize_file(dir / "b.png", 60);
  const auto o = host_test::run("encode", {"-c", config.string(), "-o", out.string(),
                                           (dir / "a.png").string(), (dir / "b.png").string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("b.png' cannot be decoded (") != std::string::npos);
  CHECK(read_all(out) == good);
  auto expected = before;
  expected.push_back("b.png");
  expected.push_back("empty.jsonl");
  expected.push_back("folder.jsonl");
  std::sort(expected.begin(), expected.end());
  CHECK(names(dir.path()) == expected);
}

TEST_CASE("file names travel as values: newlines, quotes, TOML text and stray bytes") {
  host_test::TempDir dir;
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  // Each would have broken (or rewritten) the TOML the file list used to travel in.
  const std::vector<std::string> odd = {
      "new\nline.png", "quo\"te.png", "x\"]\n[output]\nreport = \"r.json.png", "tab\tbell\x07.png"};
  std::vector<std::string> args = {"-c", config.string(), "-o", (dir / "e.st").string()};
  for (size_t i = 0; i < odd.size(); ++i) {
    host_test::write_gradient(dir / odd[i], 28, 28, static_cast<int>(i));
    args.push_back((dir / odd[i]).string());
  }
  const auto o = host_test::run("encode", args);
  INFO(o.log);
  REQUIRE(o.code == 0);
  const auto st = host_test::read_safetensors(dir / "e.st");
  for (const auto& name : odd) CHECK(st.header.contains((dir / name).string()));
  CHECK_FALSE(fs::exists(dir / "r.json"));

  // A name that is not UTF-8 cannot name a tensor: an error about the file.
  host_test::write_gradient(dir / "caf\xe9.png", 28, 28);
  const auto bad = host_test::run("encode", {"-c", config.string(), "-o", (dir / "f.st").string(),
                                             (dir / "caf\xe9.png").string()});
  CHECK(bad.code == 2);
  CHECK(bad.log.find("caf\\xE9.png': the file's name is not valid UTF-8") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "f.st"));
}

TEST_CASE("encode writes the report and the embeddings together; the digest names the files") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "a.png", 28, 28);
  host_test::write_gradient(dir / "b.png", 28, 28, 1);
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const auto digest = [&](const std::string& file) {
    const auto o = host_test::run("encode", {"-c", config.string(), "-o", (dir / "e.st").string(),
                                             "--report", (dir / "r.json").string(), file});
    REQUIRE(o.code == 0);
    std::ifstream in(dir / "r.json");
    const auto report = nlohmann::json::parse(in);
    CHECK(report["workload"]["kind"] == "files");
    CHECK(host_test::read_safetensors(dir / "e.st").header["__metadata__"]["config_digest"] ==
          report["config"]["digest"]);
    return report["config"]["digest"].get<std::string>();
  };
  CHECK(digest((dir / "a.png").string()) != digest((dir / "b.png").string()));
  CHECK(names(dir.path()) ==
        std::vector<std::string>{"a.png", "b.png", "c.toml", "e.st", "r.json"});
}

TEST_CASE("an id that is another item's output name is refused before anything runs") {
  host_test::TempDir dir;
  const fs::path config = dir.write("c.toml", host_test::toy_config());
  const fs::path trace = dir.write("t.jsonl",
                                   "{\"height\": 28, \"width\": 28, \"id\": \"a\"}\n"
                                   "{\"height\": 28, \"width\": 28, \"id\": \"a/pooled\"}\n");
  const fs::path out = dir / "e.safetensors";
  const auto o = host_test::run(
      "encode", {"-c", config.string(), "-o", out.string(), "--trace", trace.string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("item 'a': its output 'pooled' would be stored as 'a/pooled', which is the id "
                   "of another item") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // The rule itself: only names past the first output can collide.
  const std::vector<encgraph::OutputSpec> one = {{"rows", 8, EG_DTYPE_F32, 0}};
  const std::vector<encgraph::OutputSpec> two = {one[0], {"pooled", 8, EG_DTYPE_F32, 1}};
  WorkItem a, b;
  a.id = "a";
  b.id = "a/pooled";
  CHECK_NOTHROW(check_embedding_names({a, b}, one));
  CHECK_THROWS_AS(check_embedding_names({a, b}, two), encgraph::Error);
  b.id = "a/rows";  // the first output is the id itself: no clash
  CHECK_NOTHROW(check_embedding_names({a, b}, two));
  CHECK(embedding_name("x", two, 0) == "x");
  CHECK(embedding_name("x", two, 1) == "x/pooled");
}
