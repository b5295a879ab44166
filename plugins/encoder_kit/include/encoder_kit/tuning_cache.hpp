// A persistent key -> value store for tuned choices (e.g. a GEMM algorithm
// per problem), one file per "context" (the GPU and library versions the
// values are valid for) in a cache folder. CUDA-free: the values are opaque
// strings here; encoder_kit/cuda/tuning_cache.hpp builds the context and
// encodes cuBLASLt algorithms.
//
// Never fatal: an unreadable, corrupt, oversized or stale file, or a special
// file at its path, is ignored with a warning (the caller tunes afresh); an
// unwritable folder is warned about once. Writes merge with what is on disk
// and replace the file atomically (temporary file in the same folder +
// rename), so concurrent writers never leave a torn file.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace encoder_kit {

using TuningWarn = std::function<void(const std::string&)>;

// The cache folder for a plugin's `tuning_cache` setting: "off" -> "" (no
// cache); any other non-empty setting -> that folder; "" -> the default: the
// runtime's tuning option cache_dir ([plugin.tuning], "off" as above), else
// $XDG_CACHE_HOME/encgraph, else ~/.cache/encgraph ("" when none is set).
std::string tuning_cache_dir(const std::string& setting);

// The file's contents: the context line and the entries in insertion order
// (oldest first, the order in which the entry cap drops them).
struct TuningFile {
  std::string context;
  std::vector<std::pair<std::string, std::string>> entries;
};

inline constexpr int kTuningFileFormat = 1;

// Keys and values: 1..256 characters of [A-Za-z0-9._:=,+-]; a context:
// printable ASCII, up to 1024 characters.
bool valid_tuning_token(const std::string& s);
bool valid_tuning_context(const std::string& s);

// The text form: a header with the format version, the context, one
// "key value" line per entry, then a checksum line over everything before it
// (a truncated file has none, or a wrong one).
std::string serialize_tuning_file(const TuningFile& file);
// False, with the reason in `why`, for any defect; `stale` is set when the
// text is well formed but of another format version.
bool parse_tuning_file(const std::string& text, TuningFile& out, std::string& why, bool& stale);

struct TuningCacheLimits {
  size_t max_entries = 8192;                // oldest dropped past this
  size_t max_file_bytes = size_t{8} << 20;  // bigger files are ignored
};

class TuningCache {
 public:
  // `folder` "" disables the cache (nothing found, nothing written). The file
  // is `folder`/`stem`-<hash of context>.txt; nothing is read until load().
  TuningCache(std::string folder, std::string stem, std::string context, TuningWarn warn,
              TuningCacheLimits limits = {});

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& context() const { return context_; }

  // Reads the file once (later calls do nothing); problems are warnings.
  void load();
  std::optional<std::string> find(const std::string& key) const;
  // Invalid keys or values are dropped (a caller bug must not damage the file).
  void put(const std::string& key, const std::string& value);
  // Forgets an entry (e.g. one that no longer validates); written at save().
  void erase(const std::string& key);
  size_t size() const;
  // Writes pending changes merged with the file on disk. False when nothing
  // could be written (warned once per cache); true with nothing pending.
  bool save();

 private:
  enum class ReadResult { Ok, Missing, Bad };
  ReadResult read_file(TuningFile& out, bool quiet);
  void warn(const std::string& message) const;
  void warn_write_once(const std::string& message);

  std::string folder_, path_, context_;
  TuningWarn warn_;
  TuningCacheLimits limits_;
  mutable std::mutex mu_;
  bool loaded_ = false, write_warned_ = false;
  std::vector<std::pair<std::string, std::string>> entries_;
  std::vector<std::pair<std::string, std::optional<std::string>>> pending_;  // nullopt: erased
};

// A choice among named forms that tuning times (e.g. which kernel runs a
// model's MLP at one size): the name `cache` holds for `key` when it is one
// of `names` (time_ms is not called); otherwise each form is timed
// (time_ms(i): milliseconds, lower is better) and the fastest is stored under
// `key` (the caller saves the cache). `cache` may be null (always timed).
// Returns the index into `names`; `timed`, when given, says whether it timed.
size_t choose_fastest(TuningCache* cache, const std::string& key,
                      const std::vector<std::string>& names,
                      const std::function<double(size_t)>& time_ms, bool* timed = nullptr);

}  // namespace encoder_kit
