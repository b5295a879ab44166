// Plugin-side input files: stat before open, regular files only, JSON inputs
// capped, and every error naming the key and the file.
#include "kit_test_support.hpp"

#include <encoder_kit/input_file.hpp>

#include <sys/stat.h>

#include <chrono>
#include <string>

namespace {

using kit_test::contains;
using kit_test::failure_of;

const char* const kFix = "name a JSON file";

std::string read_error(const std::filesystem::path& p,
                       int64_t max = encoder_kit::kMaxJsonInputBytes) {
  const kit_test::Failure f =
      failure_of([&] { encoder_kit::read_text_input(p, "config_json", kFix, max); });
  CHECK(f.thrown);
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message, "config_json '" + p.string() + "'"));
  return f.message;
}

}  // namespace

TEST_CASE("file kinds are told apart without opening anything") {
  kit_test::TempDir dir("kit-in");
  const auto fifo = dir.path() / "f";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  kit_test::write_file(dir.path() / "r", "x");
  CHECK(encoder_kit::file_kind(dir.path() / "r") == encoder_kit::FileKind::Regular);
  CHECK(encoder_kit::file_kind(dir.path()) == encoder_kit::FileKind::Directory);
  CHECK(encoder_kit::file_kind(fifo) == encoder_kit::FileKind::Other);
  CHECK(encoder_kit::file_kind("/dev/zero") == encoder_kit::FileKind::Other);
  CHECK(encoder_kit::file_kind(dir.path() / "none") == encoder_kit::FileKind::Missing);
  CHECK(encoder_kit::special_file_kind(fifo) == "a FIFO");
  CHECK(encoder_kit::special_file_kind("/dev/null") == "a character device");
}

TEST_CASE("a FIFO, a device and a directory are refused at once, naming what they are") {
  kit_test::TempDir dir("kit-in");
  const auto fifo = dir.path() / "config.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  std::string msg = read_error(fifo);  // would block forever if opened plainly
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(contains(msg, "is a FIFO, not a regular file: name a JSON file"));
  CHECK(contains(read_error("/dev/zero"), "is a character device"));
  msg = read_error(dir.path());
  CHECK(contains(msg, "is a directory: name a JSON file"));
  CHECK(contains(read_error(dir.path() / "missing.json"), "does not exist"));
  CHECK(contains(read_error(dir.path() / "missing" / "x.json"), "does not exist"));
}

TEST_CASE("text inputs are read whole up to the cap and refused above it") {
  kit_test::TempDir dir("kit-in");
  const auto p = dir.path() / "c.json";
  for (int i = 0; i < 20; ++i) {
    const int64_t n = kit_test::uniform(0, 5000);
    std::string text;
    for (int64_t k = 0; k < n; ++k) text += static_cast<char>('a' + kit_test::uniform(0, 25));
    kit_test::write_file(p, text);
    CAPTURE(n);
    CHECK(encoder_kit::read_text_input(p, "config_json", kFix, 5000) == text);
    if (n > 0) {
      const std::string msg = read_error(p, n - 1);
      CHECK(
          contains(msg, std::to_string(n) + " bytes, over the limit of " + std::to_string(n - 1)));
    }
  }
  // A huge sparse file is refused from its size, never read.
  std::filesystem::resize_file(p, int64_t{1} << 40);
  CHECK(contains(read_error(p), "over the limit"));
}

TEST_CASE("an unreadable file names the key and the reason") {
  if (::geteuid() == 0) return;  // root reads anything
  kit_test::TempDir dir("kit-in");
  const auto p = dir.path() / "c.json";
  kit_test::write_file(p, "{}");
  std::filesystem::permissions(p, std::filesystem::perms::none);
  CHECK(contains(read_error(p), "cannot be opened"));
}

TEST_CASE("ReadOnlyFile gives the descriptor and size of a regular file") {
  kit_test::TempDir dir("kit-in");
  kit_test::write_file(dir.path() / "w", "12345");
  const encoder_kit::ReadOnlyFile f(dir.path() / "w", "plugin.weights", kFix);
  CHECK(f.fd() >= 0);
  CHECK(f.size() == 5);
}
