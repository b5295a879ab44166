// Workloads: the synthetic generator (deterministic, within the configured
// distribution), the JSONL trace reader and its errors (with line numbers), and
// file lists with glob patterns.
#include "host_test_support.hpp"
#include "workload.hpp"

#include <doctest/doctest.h>
#include <stb/stb_image_write.h>

#include <set>
#include <sstream>

using namespace encgraph::host;

namespace {

std::vector<WorkItem> trace(const std::string& text, const std::string& base = ".") {
  std::istringstream in(text);
  return parse_trace(in, "t.jsonl", base);
}

std::string trace_error(const std::string& text) {
  try {
    trace(text);
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Config);
    return e.what();
  }
  return "";
}

void write_png(const std::filesystem::path& p, int w, int h) {
  std::vector<unsigned char> px(static_cast<size_t>(w * h * 3), 100);
  REQUIRE(stbi_write_png(p.c_str(), w, h, 3, px.data(), w * 3));
}

}  // namespace

TEST_CASE("the synthetic workload is deterministic and follows the size distribution") {
  WorkloadConfig c;
  c.count = 400;
  c.seed = 3;
  c.min_side = 100;
  c.max_side = 300;
  c.side_multiple = 28;
  c.video_fraction = 0.25;
  c.frames = 6;
  const auto a = synthetic_workload(c);
  const auto b = synthetic_workload(c);
  REQUIRE(a.size() == 400);
  int videos = 0;
  std::set<int64_t> sides;
  std::set<uint64_t> seeds;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].height == b[i].height);
    CHECK(a[i].width == b[i].width);
    CHECK(a[i].seed == b[i].seed);
    CHECK(a[i].height % 28 == 0);
    CHECK(a[i].height >= 100);
    CHECK(a[i].width <= 300);
    CHECK(a[i].id == "synthetic/" + std::to_string(i));
    if (a[i].modality == EG_MODALITY_VIDEO) {
      ++videos;
      CHECK(a[i].frames == 6);
    } else {
      CHECK(a[i].frames == 1);
    }
    sides.insert(a[i].height);
    seeds.insert(a[i].seed);
  }
  CHECK(sides == std::set<int64_t>{112, 140, 168, 196, 224, 252, 280});  // every multiple drawn
  CHECK(videos > 60);
  CHECK(videos < 140);
  CHECK(seeds.size() == 400);
  c.seed = 4;
  CHECK(synthetic_workload(c)[0].seed != a[0].seed);
}

TEST_CASE("explicit sizes are drawn from the list only") {
  WorkloadConfig c;
  c.count = 50;
  c.sizes = {{224, 448}, {56, 28}};
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const auto& it : synthetic_workload(c)) seen.insert({it.height, it.width});
  CHECK(seen == std::set<std::pair<int64_t, int64_t>>{{224, 448}, {56, 28}});
}

TEST_CASE("a trace gives one item per line, blank lines skipped") {
  const auto items = trace(
      "{\"modality\": \"image\", \"height\": 224, \"width\": 448}\n"
      "\n"
      "{\"modality\": \"video\", \"height\": 112, \"width\": 112, \"frames\": 8, \"id\": \"clip\", "
      "\"seed\": 5}\n"
      "{\"height\": 28, \"width\": 28}\n");
  REQUIRE(items.size() == 3);
  CHECK(items[0].modality == EG_MODALITY_IMAGE);
  CHECK(items[0].height == 224);
  CHECK(items[0].width == 448);
  CHECK(items[0].id == "trace/1");
  CHECK(items[1].modality == EG_MODALITY_VIDEO);
  CHECK(items[1].frames == 8);
  CHECK(items[1].id == "clip");
  CHECK(items[1].seed == 5);
  CHECK(items[2].id == "trace/4");  // named and seeded by its line
  CHECK(items[2].seed == 4);
  CHECK(trace("{\"height\": 28, \"width\": 28, \"seed\": 0}")[0].seed == 0);
}

TEST_CASE("trace errors name the file and the line") {
  const std::string good = "{\"height\": 28, \"width\": 28}\n";
  struct Case {
    std::string line, expect;
  };
  const std::vector<Case> cases = {
      {"{\"height\": 28, \"width\": ", "t.jsonl:2: not valid JSON"},
      {"[1, 2]", "t.jsonl:2: expected a JSON object, got array"},
      {"{\"height\": 28, \"width\": 28, \"colour\": 1}", "t.jsonl:2: unknown field 'colour'"},
      {"{\"modality\": \"audio\", \"height\": 28, \"width\": 28}",
       "t.jsonl:2: 'modality' must be \"image\" or \"video\""},
      {"{\"height\": -28, \"width\": 28}",
       "t.jsonl:2: 'height' must be a positive integer, got -28"},
      {"{\"height\": 28.5, \"width\": 28}", "t.jsonl:2: 'height' must be a positive integer"},
      {"{\"width\": 28}", "t.jsonl:2: 'height' is required"},
      {"{\"height\": 28, \"width\": 28, \"frames\": 4}",
       "t.jsonl:2: an image has exactly one frame"},
      {"{\"modality\": \"video\", \"height\": 28, \"width\": 28, \"frames\": 0}",
       "t.jsonl:2: 'frames' must be a positive integer"},
      {"{\"height\": 28, \"width\": 28, \"file\": 3}", "t.jsonl:2: 'file' must be a string"},
      {"{\"file\": \"/nonexistent/x.png\"}", "t.jsonl:2: image '/nonexistent/x.png': no such file"},
      {"{\"modality\": \"video\", \"frames\": 2, \"file\": \"x.png\"}",
       "t.jsonl:2: 'file' is one image; give a video's frames as 'frames_files'"},
      {"{\"height\": 28, \"width\": 28, \"id\": 7}", "t.jsonl:2: 'id' must be a string"},
      {"{\"height\": 28, \"width\": 28, \"seed\": -1}",
       "t.jsonl:2: 'seed' must be a non-negative integer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    CHECK(trace_error(good + c.line + "\n" + good).find(c.expect) == 0);
  }
}

TEST_CASE("trace files are resolved against the trace's folder and give the geometry") {
  host_test::TempDir dir;
  write_png(dir / "a.png", 30, 20);
  std::filesystem::create_directories(dir / "sub");
  const auto trace_path = dir.write(
      "sub/t.jsonl", "{\"file\": \"../a.png\"}\n{\"file\": \"../a.png\", \"height\": 21}\n");
  try {
    read_trace(trace_path);
    FAIL("a disagreeing height was accepted");
  } catch (const encgraph::Error& e) {
    CHECK(std::string(e.what()).find("t.jsonl:2: 'height' = 21 disagrees with the file's 20") !=
          std::string::npos);
  }
  dir.write("sub/t.jsonl", "{\"file\": \"../a.png\", \"height\": 20, \"width\": 30}\n");
  const auto items = read_trace(trace_path);
  REQUIRE(items.size() == 1);
  CHECK(items[0].height == 20);
  CHECK(items[0].width == 30);
  CHECK(std::filesystem::equivalent(items[0].file, dir / "a.png"));
}

TEST_CASE("file workloads expand globs in order and read each header") {
  host_test::TempDir dir;
  write_png(dir / "b.png", 16, 8);
  write_png(dir / "a.png", 4, 2);
  dir.write("notes.txt", "not an image");
  const auto items = file_workload({(dir / "*.png").string(), (dir / "a.png").string()});
  REQUIRE(items.size() == 3);
  CHECK(items[0].file == (dir / "a.png").string());
  CHECK(items[0].height == 2);
  CHECK(items[1].width == 16);
  std::vector<WorkItem> named = items;
  make_ids_unique(named);
  CHECK(named[2].id == (dir / "a.png").string() + "#2");
  // A repeated id skips a suffix another item already uses.
  std::vector<WorkItem> clash(4);
  clash[0].id = "a";
  clash[1].id = "a";
  clash[2].id = "a#2";
  clash[3].id = "a";
  make_ids_unique(clash);
  CHECK(clash[0].id == "a");
  CHECK(clash[1].id == "a#3");
  CHECK(clash[2].id == "a#2");
  CHECK(clash[3].id == "a#4");
  // A file whose name holds glob characters is itself, not a pattern.
  write_png(dir / "c[1].png", 4, 2);
  const auto literal = file_workload({(dir / "c[1].png").string()});
  REQUIRE(literal.size() == 1);
  CHECK(literal[0].width == 4);
  CHECK_THROWS_WITH_AS(file_workload({(dir / "*.jpg").string()}),
                       doctest::Contains("matches no file"), encgraph::Error);
  CHECK_THROWS_WITH_AS(file_workload({(dir / "notes.txt").string()}),
                       doctest::Contains("not a PNG or JPEG image"), encgraph::Error);
}
