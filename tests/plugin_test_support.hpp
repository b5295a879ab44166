// Helpers the model plugins' suites share (tests/qwen2_5_vl, tests/siglip):
// scratch folders, error norms against a reference, exception messages, and
// the lines of a tuning cache folder.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

namespace encgraph::test {

// A fresh directory under the system temp folder, removed at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ =
        std::filesystem::temp_directory_path() /
        ("encgraph-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Every line starting with `prefix` in the files of tuning cache folder
// `dir`, sorted (a cache file's entries in a comparable form).
inline std::vector<std::string> tuning_cache_lines(const std::filesystem::path& dir,
                                                   const std::string& prefix) {
  std::vector<std::string> lines;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(f.path());
    for (std::string line; std::getline(in, line);)
      if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// ||a - b|| / ||b||; infinite when the sizes differ.
inline double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_error(a, std::vector<double>(b.begin(), b.end()));
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// precision = "fp8_linear" per item against the CPU path's f32: finite,
// within `bound` relative error, and coarser than the bf16 path's outputs.
inline void check_fp8_items(const std::vector<std::vector<float>>& fp8,
                            const std::vector<std::vector<float>>& bf16,
                            const std::vector<std::vector<float>>& cpu, double bound) {
  REQUIRE(fp8.size() == cpu.size());
  REQUIRE(bf16.size() == cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(i);
    REQUIRE(fp8[i].size() == cpu[i].size());
    CHECK(all_finite(fp8[i]));
    const double e8 = rel_error(fp8[i], cpu[i]), e16 = rel_error(bf16[i], cpu[i]);
    MESSAGE("item " << i << ": fp8 error " << e8 << ", bf16 error " << e16);
    CHECK(e8 < bound);
    CHECK(e8 > e16);
  }
}

// The what() of any std::exception `fn` throws (not only encgraph::Error, as
// error_of in test_support.hpp), or "" when it throws none.
inline std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace encgraph::test
