// The tuning cache's file store: round trip, merging writers, damaged and
// stale files ignored with a warning, atomic writes, special files refused,
// the entry cap and the default folder.
#include <encgraph/sdk/host.hpp>
#include "kit_test_support.hpp"

#include <encoder_kit/tuning_cache.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using encoder_kit::TuningCache;
using encoder_kit::TuningFile;
using kit_test::contains;
namespace fs = std::filesystem;

namespace {

constexpr const char* kContext = "gpu=Test GPU;cc=9.0;sms=132;cudart=1;cublaslt=2;encgraph=0";

struct Warnings {
  std::vector<std::string> seen;
  encoder_kit::TuningWarn fn() {
    return [this](const std::string& m) { seen.push_back(m); };
  }
  bool any(const std::string& part) const {
    for (const auto& s : seen)
      if (contains(s, part)) return true;
    return false;
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

// "k<i>", built in steps: GCC 12 warns (-Wrestrict, falsely) on "k" + to_string(i).
std::string key_of(int i) {
  std::string s = "k";
  s += std::to_string(i);
  return s;
}

// A cache holding `entries`, saved to `dir`; returns its file's path.
std::string saved_cache(const fs::path& dir,
                        const std::vector<std::pair<std::string, std::string>>& entries) {
  TuningCache c(dir.string(), "gemm", kContext, nullptr);
  c.load();
  for (const auto& [k, v] : entries) c.put(k, v);
  REQUIRE(c.save());
  return c.path();
}

}  // namespace

TEST_CASE("entries survive a save and a fresh load") {
  kit_test::TempDir dir("tuning");
  const std::string key = "gemm:m=" + std::to_string(kit_test::uniform(1, 1 << 20)) + ",n=8";
  const std::string path = saved_cache(dir.path(), {{key, "00ff:32"}, {"b", "2"}, {"c", "3"}});
  CHECK(fs::path(path).parent_path() == dir.path());
  Warnings w;
  TuningCache c(dir.path().string(), "gemm", kContext, w.fn());
  c.load();
  CHECK(c.size() == 3);
  CHECK(c.find(key) == std::optional<std::string>("00ff:32"));
  CHECK(c.find("b") == std::optional<std::string>("2"));
  CHECK_FALSE(c.find("missing"));
  CHECK(w.seen.empty());
}

TEST_CASE("serialize and parse are inverse; the text names the format and context") {
  TuningFile f{kContext, {{"x", "1"}, {"y", "2"}}};
  const std::string text = encoder_kit::serialize_tuning_file(f);
  CHECK(text.rfind("encgraph-tuning-cache 1\n", 0) == 0);
  TuningFile back;
  std::string why;
  bool stale = true;
  REQUIRE(encoder_kit::parse_tuning_file(text, back, why, stale));
  CHECK_FALSE(stale);
  CHECK(back.context == f.context);
  CHECK(back.entries == f.entries);
}

TEST_CASE("two writers merge: neither loses the other's entries") {
  kit_test::TempDir dir("tuning");
  TuningCache a(dir.path().string(), "gemm", kContext, nullptr);
  TuningCache b(dir.path().string(), "gemm", kContext, nullptr);
  a.load();
  b.load();
  a.put("from-a", "1");
  b.put("from-b", "2");
  b.put("shared", "b");
  a.put("shared", "a");
  REQUIRE(a.save());
  REQUIRE(b.save());  // written last: its value of "shared" wins
  TuningCache c(dir.path().string(), "gemm", kContext, nullptr);
  c.load();
  CHECK(c.find("from-a") == std::optional<std::string>("1"));
  CHECK(c.find("from-b") == std::optional<std::string>("2"));
  CHECK(c.find("shared") == std::optional<std::string>("b"));
  CHECK(b.find("from-a") == std::optional<std::string>("1"));  // b sees the merge too
}

TEST_CASE("erase removes an entry from the file") {
  kit_test::TempDir dir("tuning");
  saved_cache(dir.path(), {{"keep", "1"}, {"drop", "2"}});
  TuningCache c(dir.path().string(), "gemm", kContext, nullptr);
  c.load();
  c.erase("drop");
  REQUIRE(c.save());
  TuningCache d(dir.path().string(), "gemm", kContext, nullptr);
  d.load();
  CHECK(d.find("keep"));
  CHECK_FALSE(d.find("drop"));
}

TEST_CASE("a damaged or stale file is ignored with a warning, then rewritten") {
  kit_test::TempDir dir("tuning");
  const std::string path = saved_cache(dir.path(), {{"a", "1"}, {"b", "2"}});
  const std::string good = read_all(path);
  struct Damage {
    const char* name;
    std::string text;
    const char* warning;
  };
  std::string other_context = good;
  other_context.replace(other_context.find("cc=9.0"), 6, "cc=8.0");
  std::string flipped = good;
  flipped[good.find("a 1")] = 'z';
  const std::vector<Damage> cases = {
      {"truncated", good.substr(0, good.size() - 10), "truncated"},
      {"truncated mid entry", good.substr(0, good.find("b 2") + 1), "truncated"},
      {"empty", "", "bad header"},
      {"garbage",
       std::string("\x7f"
                   "ELF\0\1\2garbage\n",
                   16),
       "bad header"},
      {"a changed entry", flipped, "checksum"},
      {"another format", "encgraph-tuning-cache 99\n" + good.substr(good.find('\n') + 1), "stale"},
      {"another context", other_context, "checksum"},
      {"trailing data", good + "x 1\n", "after the checksum"},
  };
  for (const Damage& d : cases) {
    CAPTURE(d.name);
    kit_test::write_file(path, d.text);
    Warnings w;
    TuningCache c(dir.path().string(), "gemm", kContext, w.fn());
    c.load();
    CHECK(c.size() == 0);
    REQUIRE(w.seen.size() == 1);
    CHECK(w.any(d.warning));
    CHECK(w.any(path));
    c.put("fresh", "1");
    REQUIRE(c.save());
    TuningCache again(dir.path().string(), "gemm", kContext, w.fn());
    again.load();
    CHECK(again.find("fresh"));
    CHECK(again.size() == 1);
    CHECK(w.seen.size() == 1);  // the rewritten file is clean
  }
}

TEST_CASE("a file of another context with a valid checksum is stale") {
  kit_test::TempDir dir("tuning");
  const std::string path = saved_cache(dir.path(), {{"a", "1"}});
  TuningFile f{"gpu=Other;cc=8.0", {{"a", "1"}}};
  kit_test::write_file(path, encoder_kit::serialize_tuning_file(f));
  Warnings w;
  TuningCache c(dir.path().string(), "gemm", kContext, w.fn());
  c.load();
  CHECK_FALSE(c.find("a"));
  CHECK(w.any("stale"));
  CHECK(w.any("gpu=Other"));
}

TEST_CASE("a save leaves only the cache file: no temporary files") {
  kit_test::TempDir dir("tuning");
  TuningCache c(dir.path().string(), "gemm", kContext, nullptr);
  c.load();
  for (int i = 0; i < 5; ++i) {
    c.put(key_of(i), std::to_string(i));
    REQUIRE(c.save());
  }
  const auto names = names_in(dir.path());
  REQUIRE(names.size() == 1);
  CHECK(dir.path() / names[0] == fs::path(c.path()));
  CHECK(contains(names[0], "gemm-"));
}

TEST_CASE("a directory or FIFO at the file's path is refused with a warning, without a hang") {
  kit_test::TempDir dir("tuning");
  const std::string path = TuningCache(dir.path().string(), "gemm", kContext, nullptr).path();
  SUBCASE("directory") {
    fs::create_directory(path);
  }
  SUBCASE("fifo") {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  }
  Warnings w;
  TuningCache c(dir.path().string(), "gemm", kContext, w.fn());
  c.load();
  CHECK(c.size() == 0);
  CHECK(w.any("not a regular file"));
  c.put("a", "1");
  CHECK_FALSE(c.save());
  CHECK_FALSE(c.save());
  CHECK(w.seen.size() == 2);  // one for the read, one (once) for the writes
  CHECK(w.any("not written"));
  CHECK(names_in(dir.path()).size() == 1);  // nothing else created
  CHECK_FALSE(fs::is_regular_file(path));   // and the special file is untouched
}

TEST_CASE("an unwritable folder is warned about once") {
  kit_test::TempDir dir("tuning");
  const fs::path file = dir.path() / "not-a-folder";
  kit_test::write_file(file, "x");
  Warnings w;
  TuningCache c(file.string(), "gemm", kContext, w.fn());
  c.load();
  c.put("a", "1");
  CHECK_FALSE(c.save());
  c.put("b", "2");
  CHECK_FALSE(c.save());
  CHECK(w.seen.size() == 1);
  CHECK(w.any("tuning_cache"));
  CHECK(read_all(file) == "x");
}

TEST_CASE("the entry cap keeps the newest entries; oversized files are ignored") {
  kit_test::TempDir dir("tuning");
  encoder_kit::TuningCacheLimits limits;
  limits.max_entries = 4;
  TuningCache c(dir.path().string(), "gemm", kContext, nullptr, limits);
  c.load();
  for (int i = 0; i < 10; ++i) c.put(key_of(i), "1");
  REQUIRE(c.save());
  CHECK(c.size() == 4);
  CHECK_FALSE(c.find("k5"));
  CHECK(c.find("k9"));
  limits.max_file_bytes = 64;
  Warnings w;
  TuningCache small(dir.path().string(), "gemm", kContext, w.fn(), limits);
  small.load();
  CHECK(small.size() == 0);
  CHECK(w.any("larger than 64 bytes"));
}

TEST_CASE("invalid keys and values are dropped; a disabled cache does nothing") {
  kit_test::TempDir dir("tuning");
  TuningCache c(dir.path().string(), "gemm", kContext, nullptr);
  c.load();
  c.put("has space", "1");
  c.put("k", "line\nbreak");
  c.put("", "1");
  CHECK(c.size() == 0);
  TuningCache off("", "gemm", kContext, nullptr);
  CHECK_FALSE(off.enabled());
  off.load();
  off.put("a", "1");
  CHECK(off.save());
  CHECK_FALSE(off.find("a"));
  CHECK(names_in(dir.path()).empty());
}

namespace {
const char* g_cache_dir = nullptr;  // the tuning option cache_dir (nullptr: unset)
const char* cache_dir_option(void*, const char* key) {
  return std::string(key) == "cache_dir" ? g_cache_dir : nullptr;
}
}  // namespace

TEST_CASE("the default folder: the tuning option cache_dir, XDG_CACHE_HOME, HOME; 'off'") {
  struct Env {
    std::string name;
    std::optional<std::string> old;
    explicit Env(const char* n) : name(n) {
      if (const char* v = std::getenv(n)) old = v;
    }
    ~Env() {
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  } e2("XDG_CACHE_HOME"), e3("HOME");
  eg_host_api api{};
  api.abi_major = EG_ABI_VERSION_MAJOR;
  api.abi_minor = EG_ABI_VERSION_MINOR;
  api.struct_size = sizeof(eg_host_api);
  api.tuning_option = cache_dir_option;
  const eg_host_api* before = encgraph::sdk::host().api();
  encgraph::sdk::host().attach(&api, "test");
  g_cache_dir = "/a";
  ::setenv("XDG_CACHE_HOME", "/b", 1);
  ::setenv("HOME", "/c", 1);
  CHECK(encoder_kit::tuning_cache_dir("") == "/a");
  CHECK(encoder_kit::tuning_cache_dir("/mine") == "/mine");  // the plugin's own key wins
  CHECK(encoder_kit::tuning_cache_dir("off") == "");
  g_cache_dir = "off";
  CHECK(encoder_kit::tuning_cache_dir("") == "");
  CHECK(encoder_kit::tuning_cache_dir("/mine") == "/mine");
  g_cache_dir = nullptr;
  CHECK(encoder_kit::tuning_cache_dir("") == "/b/encgraph");
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(encoder_kit::tuning_cache_dir("") == "/c/.cache/encgraph");
  ::unsetenv("HOME");
  CHECK(encoder_kit::tuning_cache_dir("") == "");
  encgraph::sdk::host().attach(before, "test");
}

TEST_CASE("choose_fastest times once, stores the fastest, and takes a stored choice untimed") {
  kit_test::TempDir dir("tuning");
  const std::vector<std::string> names = {"cublaslt", "fused"};
  // Random times, so either form may win; the cache must keep the winner.
  const double t0 = kit_test::uniform(1, 1000), t1 = kit_test::uniform(1, 1000);
  const size_t want = t1 < t0 ? 1 : 0;
  int calls = 0;
  auto time_ms = [&](size_t i) {
    ++calls;
    return i == 0 ? t0 : t1;
  };
  const std::string key = "qwen-mlp:p=256,d=1280,inter=3456";
  Warnings w;
  {
    TuningCache c(dir.path().string(), "gemm", kContext, w.fn());
    c.load();
    bool timed = false;
    CHECK(encoder_kit::choose_fastest(&c, key, names, time_ms, &timed) == want);
    CHECK(timed);
    CHECK(calls == 2);
    CHECK(c.find(key) == std::optional<std::string>(names[want]));
    REQUIRE(c.save());
  }
  // A fresh process: the stored name is taken without timing anything.
  TuningCache c(dir.path().string(), "gemm", kContext, w.fn());
  c.load();
  bool timed = true;
  CHECK(encoder_kit::choose_fastest(&c, key, names, time_ms, &timed) == want);
  CHECK_FALSE(timed);
  CHECK(calls == 2);
  // A stored name that is not a candidate (another build's form) is timed
  // afresh and replaced.
  c.put(key, "banana");
  CHECK(encoder_kit::choose_fastest(&c, key, names, time_ms, &timed) == want);
  CHECK(timed);
  CHECK(calls == 4);
  CHECK(c.find(key) == std::optional<std::string>(names[want]));
  // No cache: always timed.
  CHECK(encoder_kit::choose_fastest(nullptr, key, names, time_ms, &timed) == want);
  CHECK(timed);
  CHECK(calls == 6);
  CHECK(w.seen.empty());
}
