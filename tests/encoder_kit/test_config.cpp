// Plugin configuration: the shared keys on the SDK's reader, bounds that name
// the key, checked size arithmetic, and config_json read safely.
#include "kit_test_support.hpp"

#include <encoder_kit/checked.hpp>
#include <encoder_kit/config.hpp>
#include <encoder_kit/config_json.hpp>

#include <sys/stat.h>

#include <limits>
#include <string>
#include <vector>

namespace {

using kit_test::contains;
using kit_test::failure_of;

struct Table {
  std::vector<std::pair<std::string, std::string>> kv;
  std::vector<eg_config_entry> entries;
  encgraph::sdk::Config reader() {
    entries.clear();
    for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
    return encgraph::sdk::Config(entries.data(), static_cast<int64_t>(entries.size()), "p");
  }
};

}  // namespace

TEST_CASE("checked products and sums: random operands agree with 128-bit arithmetic") {
  for (int i = 0; i < 2000; ++i) {
    const int bits_a = static_cast<int>(kit_test::uniform(0, 62));
    const int bits_b = static_cast<int>(kit_test::uniform(0, 62));
    const int64_t a = kit_test::uniform(-(int64_t{1} << bits_a), int64_t{1} << bits_a);
    const int64_t b = kit_test::uniform(-(int64_t{1} << bits_b), int64_t{1} << bits_b);
    CAPTURE(a);
    CAPTURE(b);
    const __int128 p = static_cast<__int128>(a) * b, s = static_cast<__int128>(a) + b;
    const bool p_fits =
        p >= std::numeric_limits<int64_t>::min() && p <= std::numeric_limits<int64_t>::max();
    const bool s_fits =
        s >= std::numeric_limits<int64_t>::min() && s <= std::numeric_limits<int64_t>::max();
    int64_t product = 0, sum = 0;
    const kit_test::Failure fp =
        failure_of([&] { product = encoder_kit::checked_mul(a, b, "rows"); });
    CHECK(fp.thrown == !p_fits);
    if (fp.thrown) {
      CHECK(fp.status == EG_ERR_INVALID_ARGUMENT);
      CHECK(contains(fp.message, "rows overflows 64 bits"));
    } else {
      CHECK(product == p);
    }
    const kit_test::Failure fs = failure_of([&] { sum = encoder_kit::checked_add(a, b, "rows"); });
    CHECK(fs.thrown == !s_fits);
    if (!fs.thrown) CHECK(sum == s);
  }
  CHECK(encoder_kit::checked_product({3, 5, 7}, "x") == 105);
  CHECK(failure_of([] {
          encoder_kit::checked_product({int64_t{1} << 62, 2, 1}, "patch values");
        }).thrown);
}

TEST_CASE("bounds name the plugin, the key, the value and the range") {
  for (int i = 0; i < 100; ++i) {
    const int64_t lo = kit_test::uniform(-1000, 1000), hi = lo + kit_test::uniform(0, 1000);
    const int64_t v = kit_test::uniform(lo - 100, hi + 100);
    const kit_test::Failure f =
        failure_of([&] { encoder_kit::require_in_range("qwen2_5_vl", "patch_size", v, lo, hi); });
    CHECK(f.thrown == (v < lo || v > hi));
    if (f.thrown)
      CHECK(f.message == "qwen2_5_vl: patch_size = " + std::to_string(v) + " is outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
}

TEST_CASE("check_finite defaults to true and reads a boolean") {
  Table t;
  encgraph::sdk::Config none = t.reader();
  CHECK(encoder_kit::read_check_finite(none));
  t.kv = {{"check_finite", "false"}};
  encgraph::sdk::Config r = t.reader();
  CHECK_FALSE(encoder_kit::read_check_finite(r));
  CHECK_NOTHROW(r.reject_unknown());  // the key counts as understood
  t.kv = {{"check_finite", "maybe"}};
  encgraph::sdk::Config bad = t.reader();
  CHECK(contains(failure_of([&] { encoder_kit::read_check_finite(bad); }).message, "check_finite"));
}

TEST_CASE("checkpoint keys override a named config.json but must agree with the folder's") {
  Table t;
  t.kv = {{"depth", "4"}, {"layers", "[1, 2]"}};
  encgraph::sdk::Config r = t.reader();
  int64_t depth = 8;
  std::vector<int64_t> layers = {3};
  encoder_kit::CheckpointKeys named(r, "");  // config_json, or no file: keys win
  named.dim("depth", depth);
  named.int_list("layers", layers);
  CHECK(depth == 4);
  CHECK(layers == std::vector<int64_t>{1, 2});
  CHECK_NOTHROW(r.reject_unknown());  // both keys read
  const encoder_kit::CheckpointKeys folder(r, "/ckpt/config.json");
  depth = 8;
  const kit_test::Failure f = failure_of([&] { folder.dim("depth", depth); });
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message,
                 "p: [plugin.config] depth = 4 contradicts config.json "
                 "'/ckpt/config.json' vision_config.depth = 8"));
  layers = {3};
  CHECK(contains(failure_of([&] { folder.int_list("layers", layers); }).message,
                 "[plugin.config] layers contradicts config.json '/ckpt/config.json'"));
  depth = 4;  // the same value in both: accepted
  folder.dim("depth", depth);
  CHECK(depth == 4);
}

TEST_CASE("dtypes the device does not compute in are a config error") {
  Table t;
  t.kv = {{"dtype", "bf16"}};
  encgraph::sdk::Config r = t.reader();
  const kit_test::Failure f =
      failure_of([&] { encoder_kit::read_compute_dtype(r, EG_DEVICE_CPU); });
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);  // the CLI's exit 2
  CHECK(contains(f.message, "set dtype = \"f32\""));
}

TEST_CASE("config_json: special files, non-objects and non-integers name the key and file") {
  kit_test::TempDir dir("kit-cfg");
  const auto p = dir.path() / "config.json";
  auto error = [&](const std::filesystem::path& path) {
    const kit_test::Failure f =
        failure_of([&] { encoder_kit::VisionConfigJson(path.string(), "qwen2_5_vl"); });
    CHECK(f.thrown);
    CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
    CHECK(contains(f.message, "qwen2_5_vl: [plugin.config] config_json '" + path.string() + "'"));
    return f.message;
  };
  CHECK(contains(error("/dev/zero"), "is a character device"));
  CHECK(contains(error(dir.path()), "is a directory"));
  CHECK(contains(error(dir.path() / "none.json"), "does not exist"));
  const auto fifo = dir.path() / "fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(contains(error(fifo), "is a FIFO"));
  kit_test::write_file(p, "[1, 2]");
  CHECK(contains(error(p), "is not a JSON object"));
  kit_test::write_file(p, "{\"vision_config\": 3}");
  CHECK(contains(error(p), "vision_config is not an object"));
  kit_test::write_file(p, "{\"vision_config\": {\"depth\": 4}} x");
  CHECK(contains(error(p), "trailing characters"));

  kit_test::write_file(p, "{\"vision_config\": {\"depth\": 1e300, \"patch_size\": 14}}");
  const encoder_kit::VisionConfigJson v(p.string(), "qwen2_5_vl");
  int64_t patch = 0, depth = 7;
  v.read_int("patch_size", patch);
  CHECK(patch == 14);
  const kit_test::Failure f = failure_of([&] { v.read_int("depth", depth); });
  CHECK(contains(f.message, "vision_config.depth must be an integer within 64 bits, got 1e300"));
  CHECK(depth == 7);  // left as it was
}

TEST_CASE("config_json: a whole model's config without vision_config is refused") {
  kit_test::TempDir dir("kit-cfg");
  const auto p = dir.path() / "config.json";
  auto message = [&](const std::string& text) {
    kit_test::write_file(p, text);
    const kit_test::Failure f =
        failure_of([&] { encoder_kit::VisionConfigJson(p.string(), "qwen2_5_vl"); });
    CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
    return f.message;
  };
  CHECK(contains(message(R"({"model_type": "qwen2_5_vl", "hidden_size": 3584, "vocab_size": 9})"),
                 "has a vocab_size but no vision_config"));
  CHECK(contains(message(R"({"text_config": {"hidden_size": 3584}})"), "has a text_config"));
  const std::string arch =
      message(R"({"architectures": ["Qwen2_5_VLForConditionalGeneration"], "hidden_size": 8})");
  CHECK(contains(arch, "architecture 'Qwen2_5_VLForConditionalGeneration'"));
  CHECK(contains(arch, p.string()));
  CHECK(contains(arch, "language model"));
  // A bare vision config (its own model_type included) is the tower's.
  kit_test::write_file(p, R"({"model_type": "qwen2_5_vl", "depth": 4, "hidden_size": 8})");
  const encoder_kit::VisionConfigJson bare(p.string(), "qwen2_5_vl");
  int64_t depth = 0;
  bare.read_int("depth", depth);
  CHECK(depth == 4);
}

TEST_CASE("checkpoint folders: files there must be regular; config.json unless every size") {
  kit_test::TempDir dir("kit-folder");
  const auto d = dir.path();
  auto folder_error = [&] {
    const kit_test::Failure f = failure_of([&] { encoder_kit::checkpoint_folder(d.c_str()); });
    CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
    return f.message;
  };
  // Absent files are "", present ones named.
  encoder_kit::CheckpointFolder f = encoder_kit::checkpoint_folder(d.c_str());
  CHECK(f.dir == d.string());
  CHECK(f.config.empty());
  CHECK(encoder_kit::checkpoint_folder("random").dir.empty());
  CHECK(encoder_kit::checkpoint_folder(nullptr).dir.empty());
  kit_test::write_file(d / "config.json", "{}");
  CHECK(encoder_kit::checkpoint_folder(d.c_str()).config == (d / "config.json").string());
  // A directory, a FIFO, a broken link where a file belongs.
  std::filesystem::create_directory(d / "preprocessor_config.json");
  std::string m = folder_error();
  CHECK(contains(m, "'" + (d / "preprocessor_config.json").string() + "' is a directory"));
  CHECK(contains(m, "plugin.weights folder '" + d.string() + "'"));
  std::filesystem::remove(d / "preprocessor_config.json");
  REQUIRE(::mkfifo((d / "video_preprocessor_config.json").c_str(), 0600) == 0);
  CHECK(contains(folder_error(), "video_preprocessor_config.json' is a FIFO, not a regular file"));
  std::filesystem::remove(d / "video_preprocessor_config.json");
  std::filesystem::remove(d / "config.json");
  std::filesystem::create_symlink(d / "gone.json", d / "config.json");
  CHECK(contains(folder_error(), "config.json' is a broken symbolic link"));
  std::filesystem::remove(d / "config.json");

  // No config.json: every size key, or config_json, or an error naming what is missing.
  f = encoder_kit::checkpoint_folder(d.c_str());
  Table t;
  t.kv = {{"depth", "2"}};
  encgraph::sdk::Config some = t.reader();
  const kit_test::Failure missing = failure_of([&] {
    encoder_kit::require_folder_config(f, some, {"depth", "hidden_size"});
  });
  CHECK(missing.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(missing.message,
                 "p: plugin.weights folder '" + d.string() + "' has no config.json"));
  CHECK(contains(missing.message, "(hidden_size would come"));
  t.kv = {{"depth", "2"}, {"hidden_size", "8"}};
  encgraph::sdk::Config all = t.reader();
  encoder_kit::require_folder_config(f, all, {"depth", "hidden_size"});
  t.kv = {{"config_json", "/elsewhere/config.json"}};
  encgraph::sdk::Config named = t.reader();
  encoder_kit::require_folder_config(f, named, {"depth", "hidden_size"});
  encoder_kit::require_folder_config(encoder_kit::CheckpointFolder{}, some, {"hidden_size"});
}

TEST_CASE("preprocessor files: bounds that contradict each other name the file and both") {
  kit_test::TempDir dir("kit-pre");
  const auto p = dir.path() / "preprocessor_config.json";
  auto error = [&](const std::string& text) {
    kit_test::write_file(p, text);
    return failure_of([&] { encoder_kit::PreprocessorJson(p.string(), "qwen2_5_vl"); });
  };
  kit_test::Failure f = error(R"({"min_pixels": 1000000, "max_pixels": 3136})");
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message, "qwen2_5_vl: preprocessor_config '" + p.string() +
                                "' has min_pixels = 1000000 above max_pixels = 3136"));
  f = error(R"({"size": {"shortest_edge": 9, "longest_edge": 4}})");
  CHECK(contains(f.message, "size.shortest_edge = 9 above size.longest_edge = 4"));
  // The flat keys win over size's, as the processors read them.
  f = error(R"({"size": {"shortest_edge": 3136, "longest_edge": 9000}, "max_pixels": 5})");
  CHECK(contains(f.message, "size.shortest_edge = 3136 above max_pixels = 5"));
  // Ordered, equal, or only one of the two: read as before.
  CHECK_FALSE(error(R"({"min_pixels": 3136, "max_pixels": 3136})").thrown);
  // min_pixels replaces size.shortest_edge: 1 <= 4 holds.
  CHECK_FALSE(
      error(R"({"min_pixels": 1, "size": {"shortest_edge": 9, "longest_edge": 4}})").thrown);
  CHECK_FALSE(error(R"({"size": {"shortest_edge": 3136}})").thrown);
}
