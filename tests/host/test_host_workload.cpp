// Workloads: the synthetic generator (deterministic, within the configured
// distribution), the JSONL trace reader and its errors (with line numbers), and
// file lists with glob patterns.
#include "host_test_support.hpp"
#include "workload.hpp"

#include <doctest/doctest.h>
#include <stb/stb_image_write.h>
#include <sys/stat.h>

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
    CHECK(e.kind() == encgraph::ErrorKind::Input);
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
      {"{\"file\": \"/nonexistent/x.png\"}",
       "t.jsonl:2: image '/nonexistent/x.png' does not exist: check the path"},
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
                       doctest::Contains("is not a PNG or JPEG image"), encgraph::Error);
}

TEST_CASE("trace ids are checked when the trace is read, naming the line and the fix") {
  const std::string good = "{\"height\": 28, \"width\": 28}\n";
  struct Case {
    std::string line, expect;
  };
  const std::vector<Case> cases = {
      {"{\"height\": 28, \"width\": 28, \"id\": \"__metadata__\"}",
       "t.jsonl:2 (id \"__metadata__\"): 'id' \"__metadata__\" is reserved by the safetensors "
       "format"},
      {"{\"height\": 28, \"width\": 28, \"id\": \"\"}", "t.jsonl:2: 'id' is empty; give the item"},
      {"{\"height\": 28, \"width\": 28, \"id\": \"a\\nb\"}",
       "'id' \"a\\nb\" holds a control character"},
      {"{\"height\": 28, \"width\": 28, \"id\": \"bell\\u0007\"}", "holds a control character"},
      {"{\"height\": 28, \"width\": 28, \"id\": \"\xff\xfe\"}",
       "t.jsonl:2: the line is not valid UTF-8"},
      {"{\"height\": 28, \"width\": 28, \"id\": \"trace/1\"}",
       "t.jsonl:2 (id \"trace/1\"): id \"trace/1\" is already the id of line 1"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    const std::string message = trace_error(good + c.line + "\n" + good);
    CHECK(message.find(c.expect) != std::string::npos);
  }
  // Two explicit ids alike: the second line is named with the first's number.
  CHECK(trace_error("{\"height\": 28, \"width\": 28, \"id\": \"x\"}\n\n"
                    "{\"height\": 28, \"width\": 28, \"id\": \"x\"}\n")
            .find("t.jsonl:3 (id \"x\"): id \"x\" is already the id of line 1") == 0);
  // An explicit id taking a later line's default name clashes at that line.
  CHECK(trace_error("{\"height\": 28, \"width\": 28, \"id\": \"trace/2\"}\n" + good)
            .find("t.jsonl:2: id \"trace/2\" is already the id of line 1") == 0);
  // Unicode ids are fine.
  CHECK(trace("{\"height\": 28, \"width\": 28, \"id\": \"chat/\xc3\xa9t\xc3\xa9\"}")[0].id ==
        "chat/\xc3\xa9t\xc3\xa9");
}

TEST_CASE("trace limits: frames, pixels and items, each naming the line and the key") {
  LimitsConfig limits;
  limits.max_frames_per_video = 16;
  limits.max_image_pixels = 10000;
  limits.max_items = 3;
  const auto error = [&](const std::string& text) -> std::string {
    std::istringstream in(text);
    try {
      parse_trace(in, "t.jsonl", ".", limits);
    } catch (const encgraph::Error& e) {
      CHECK(e.kind() == encgraph::ErrorKind::Input);
      return e.what();
    }
    return "";
  };
  CHECK(error("{\"modality\": \"video\", \"height\": 28, \"width\": 28, \"frames\": 1000000, "
              "\"id\": \"huge\"}")
            .find("t.jsonl:1 (id \"huge\"): 'frames' asks for 1000000 frames, over the limit of "
                  "16 frames per video (limits.max_frames_per_video") == 0);
  CHECK(error("{\"height\": 100000, \"width\": 100000}")
            .find("t.jsonl:1: 100000x100000 is too large: over the limit of 10000 pixels per "
                  "image or frame (limits.max_image_pixels") == 0);
  const std::string line = "{\"height\": 28, \"width\": 28}\n";
  CHECK(error(line + line + line).empty());
  CHECK(error(line + line + line + line)
            .find("t.jsonl:4: the trace holds more than 3 items (limits.max_items") == 0);
  // A frame list longer than the limit is refused before any frame is looked at.
  std::string files = "[";
  for (int i = 0; i < 17; ++i) files += std::string(i ? ", " : "") + "\"missing.png\"";
  CHECK(error("{\"frames_files\": " + files + "]}").find("'frames_files' lists 17 frames") !=
        std::string::npos);
  // Within the limits, the same lines pass.
  limits = LimitsConfig{};
  CHECK(error("{\"modality\": \"video\", \"height\": 28, \"width\": 28, \"frames\": 64}").empty());
}

TEST_CASE("a trace must be a regular file within limits.max_text_bytes; an empty one is refused") {
  host_test::TempDir dir;
  std::filesystem::create_directories(dir / "folder.jsonl");
  CHECK_THROWS_WITH_AS(read_trace(dir / "folder.jsonl"),
                       doctest::Contains("is a directory, not a regular file: name a trace file"),
                       encgraph::Error);
  REQUIRE(::mkfifo((dir / "fifo.jsonl").c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(read_trace(dir / "fifo.jsonl"), doctest::Contains("is a FIFO"),
                       encgraph::Error);  // returns at once: a FIFO is never opened
  CHECK_THROWS_WITH_AS(read_trace(dir / "missing.jsonl"), doctest::Contains("does not exist"),
                       encgraph::Error);
  LimitsConfig small;
  small.max_text_bytes = 10;
  const auto big = dir.write("big.jsonl", "{\"height\": 28, \"width\": 28}\n");
  CHECK_THROWS_WITH_AS(read_trace(big, small),
                       doctest::Contains("over the limit of 10 bytes for a trace "
                                         "(limits.max_text_bytes"),
                       encgraph::Error);

  WorkloadConfig c;
  c.kind = "trace";
  c.trace = dir.write("empty.jsonl", "\n  \n").string();
  const auto items = build_workload(c);
  CHECK(items.empty());
  const std::string expected =
      "encode needs at least one item, and the workload holds none (the trace '" + c.trace +
      "' is empty";
  CHECK_THROWS_WITH_AS(require_items(items, c, "encode"), doctest::Contains(expected.c_str()),
                       encgraph::Error);
  c.kind = "synthetic";
  c.count = 0;
  CHECK_THROWS_WITH_AS(require_items(synthetic_workload(c), c, "run"),
                       doctest::Contains("workload.count = 0"), encgraph::Error);
  c.count = 1;
  CHECK_NOTHROW(require_items(synthetic_workload(c), c, "run"));
}

TEST_CASE("file workloads: ids safetensors can hold, and limits.max_items") {
  host_test::TempDir dir;
  // A newline, a quote, a control byte: the path is the id, written as is.
  const auto odd = dir / "a\nb\"c\x01.png";
  write_png(odd, 4, 2);
  const auto items = file_workload({odd.string()});
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == odd.string());
  // A name that is not UTF-8 cannot name a tensor: the error is about the file.
  const auto latin1 = dir / "caf\xe9.png";
  write_png(latin1, 4, 2);
  CHECK_THROWS_WITH_AS(file_workload({latin1.string()}),
                       doctest::Contains("caf\\xE9.png': the file's name is not valid UTF-8"),
                       encgraph::Error);
  write_png(dir / "b.png", 4, 2);
  LimitsConfig limits;
  limits.max_items = 1;
  CHECK_THROWS_WITH_AS(file_workload({(dir / "*.png").string()}, limits),
                       doctest::Contains("more than 1 image files (limits.max_items"),
                       encgraph::Error);
  limits.max_image_pixels = 7;
  CHECK_THROWS_WITH_AS(file_workload({(dir / "b.png").string()}, limits),
                       doctest::Contains("4x2 is over the limit of 7 pixels"), encgraph::Error);
  // A folder matched by a pattern is named as a folder.
  std::filesystem::create_directories(dir / "sub.png");
  CHECK_THROWS_WITH_AS(file_workload({(dir / "sub.png").string()}),
                       doctest::Contains("is a directory, not a regular file: name an image file"),
                       encgraph::Error);
}

TEST_CASE("trace lines: NUL bytes, repeated keys and out-of-range numbers are errors") {
  const std::string good = "{\"height\": 28, \"width\": 28}\n";
  struct Case {
    std::string line, expect;
  };
  const std::vector<Case> cases = {
      // nlohmann stops at a NUL as at the end of the text: the rest would be lost.
      {std::string("{\"height\": 28, \"width\": 28}\0{\"x\": 1}", 36),
       "t.jsonl:2: the line holds a NUL byte (column 28)"},
      // nlohmann keeps the last of a repeated key without a word.
      {"{\"height\": 28, \"width\": 28, \"height\": 56}",
       "t.jsonl:2: field 'height' is given twice"},
      {"{\"height\": 1e400, \"width\": 28}",
       "t.jsonl:2: not valid JSON: the number 1e400 is out of range"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    CHECK(trace_error(good + c.line + "\n" + good).find(c.expect) == 0);
  }
  // A repeated key inside a value is not the line's: no such value exists in
  // the format, so it fails on its own terms.
  CHECK(trace_error("{\"height\": 28, \"width\": 28, \"id\": {\"a\": 1, \"a\": 2}}\n")
            .find("'id' must be a string") != std::string::npos);
}

TEST_CASE("trace messages show a huge value cut short, with its size") {
  const std::string huge(1 << 20, 'k');
  const std::string key = trace_error("{\"height\": 28, \"width\": 28, \"" + huge + "\": 1}\n");
  CHECK(key.find("unknown field 'kkkk") != std::string::npos);
  CHECK(key.find("... (1048576 bytes)'") != std::string::npos);
  CHECK(key.size() < 400);
  const std::string value =
      trace_error("{\"height\": 28, \"width\": 28, \"modality\": \"" + huge + "\"}\n");
  CHECK(value.find("... (1048578 bytes)") != std::string::npos);
  CHECK(value.size() < 400);
  const std::string unclosed = trace_error("{\"height\": 28, \"width\": 28, \"id\": \"" + huge);
  CHECK(unclosed.find("missing closing quote; last read: '\"kkk") != std::string::npos);
  CHECK(unclosed.size() < 400);
  const std::string digits =
      trace_error("{\"height\": " + std::string(1 << 20, '9') + ", \"width\": 28}");
  CHECK(digits.find("the number 9999") != std::string::npos);
  CHECK(digits.size() < 400);
}

TEST_CASE("trace: CRLF endings and a BOM are read; a seed of -0 is 0; 2^64-1 is kept") {
  const auto items = trace(
      "\xEF\xBB\xBF{\"height\": 28, \"width\": 28, \"seed\": -0}\r\n"
      "{\"height\": 28, \"width\": 28, \"seed\": 18446744073709551615}\r\n");
  REQUIRE(items.size() == 2);
  CHECK(items[0].seed == 0);
  CHECK(items[1].seed == 18446744073709551615ull);
}

TEST_CASE("a pattern that matches nothing says what '**' and braces do here") {
  host_test::TempDir dir;
  const auto error = [&](const std::string& pattern) {
    try {
      file_workload({(dir.path() / pattern).string()});
    } catch (const encgraph::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error("**/*.png").find("'**' is not recursive here") != std::string::npos);
  CHECK(error("[ab]/{x,y}.png").find("braces are not expanded") != std::string::npos);
  CHECK(error("*.png").find("matches no file") != std::string::npos);
  CHECK(error("*.png").find("recursive") == std::string::npos);
}
