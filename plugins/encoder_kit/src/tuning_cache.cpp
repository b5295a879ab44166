// The tuning cache's file format and IO (see tuning_cache.hpp). POSIX calls
// rather than streams: a FIFO must be refused without blocking in open(), and
// the temporary file must be created exclusively.
#include <encoder_kit/tuning_cache.hpp>

#include <encgraph/sdk/host.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace encoder_kit {

namespace {

constexpr const char* kMagic = "encgraph-tuning-cache";

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

std::string errno_text(int e) {
  return std::strerror(e);
}

// Splits off the first line (without its '\n'); false when there is no '\n'.
bool next_line(const std::string& text, size_t& pos, std::string& line) {
  const size_t end = text.find('\n', pos);
  if (end == std::string::npos) return false;
  line = text.substr(pos, end - pos);
  pos = end + 1;
  return true;
}

// Writes all of `data` to `fd`, retrying short writes.
bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string tuning_cache_dir(const std::string& setting) {
  if (setting == "off") return {};
  if (!setting.empty()) return setting;
  // [plugin.tuning] cache_dir, for every plugin at once ("off" as above).
  if (const char* d = encgraph::sdk::host().tuning_option("cache_dir"); d && *d)
    return std::string(d) == "off" ? std::string() : std::string(d);
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/encgraph";
  if (const std::string h = env("HOME"); !h.empty()) return h + "/.cache/encgraph";
  return {};
}

bool valid_tuning_token(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (const char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          std::strchr("._:=,+-", c) != nullptr))
      return false;
  return true;
}

bool valid_tuning_context(const std::string& s) {
  if (s.empty() || s.size() > 1024) return false;
  for (const char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

std::string serialize_tuning_file(const TuningFile& file) {
  std::string body = std::string(kMagic) + " " + std::to_string(kTuningFileFormat) + "\n";
  body += "context " + file.context + "\n";
  for (const auto& [key, value] : file.entries) body += key + " " + value + "\n";
  return body + "checksum " + hex64(fnv1a(body)) + "\n";
}

bool parse_tuning_file(const std::string& text, TuningFile& out, std::string& why, bool& stale) {
  stale = false;
  out = TuningFile{};
  size_t pos = 0;
  std::string line;
  const std::string magic = std::string(kMagic) + " ";
  if (!next_line(text, pos, line) || line.rfind(magic, 0) != 0) {
    why = "not a tuning cache file (bad header)";
    return false;
  }
  if (line != magic + std::to_string(kTuningFileFormat)) {
    why = "written in another format (" + line.substr(magic.size(), 16) + ", this build reads " +
          std::to_string(kTuningFileFormat) + ")";
    stale = true;
    return false;
  }
  if (!next_line(text, pos, line) || line.rfind("context ", 0) != 0 ||
      !valid_tuning_context(line.substr(8))) {
    why = "no valid context line";
    return false;
  }
  out.context = line.substr(8);
  while (true) {
    const size_t line_start = pos;
    if (!next_line(text, pos, line)) {
      why = "truncated (no checksum line)";
      return false;
    }
    if (line.rfind("checksum ", 0) == 0) {
      if (line.substr(9) != hex64(fnv1a(text.substr(0, line_start)))) {
        why = "checksum mismatch (damaged or truncated)";
        return false;
      }
      if (pos != text.size()) {
        why = "data after the checksum line";
        return false;
      }
      return true;
    }
    const size_t space = line.find(' ');
    if (space == std::string::npos || !valid_tuning_token(line.substr(0, space)) ||
        !valid_tuning_token(line.substr(space + 1))) {
      why = "malformed entry line";
      return false;
    }
    out.entries.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
}

TuningCache::TuningCache(std::string folder, std::string stem, std::string context, TuningWarn warn,
                         TuningCacheLimits limits)
    : folder_(std::move(folder)),
      context_(std::move(context)),
      warn_(std::move(warn)),
      limits_(limits) {
  if (!valid_tuning_context(context_)) {
    this->warn("tuning cache: invalid context; the cache is off");
    folder_.clear();
  }
  if (!folder_.empty()) path_ = folder_ + "/" + stem + "-" + hex64(fnv1a(context_)) + ".txt";
}

void TuningCache::warn(const std::string& message) const {
  if (warn_) warn_(message);
}

void TuningCache::warn_write_once(const std::string& message) {
  if (write_warned_) return;
  write_warned_ = true;
  warn(message +
       "; tuned choices are not kept (set the plugin key tuning_cache to a writable "
       "folder, or \"off\")");
}

TuningCache::ReadResult TuningCache::read_file(TuningFile& out, bool quiet) {
  auto bad = [&](const std::string& why) {
    if (!quiet) warn("tuning cache " + path_ + ": " + why + "; ignored, tuning afresh");
    return ReadResult::Bad;
  };
  // O_NONBLOCK: opening a FIFO without a writer must not hang.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return ReadResult::Missing;  // save() warns if need be
    return bad("cannot be opened (" + errno_text(e) + ")");
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return bad("cannot be examined (" + errno_text(errno) + ")");
  if (!S_ISREG(st.st_mode)) return bad("is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits_.max_file_bytes)
    return bad("is larger than " + std::to_string(limits_.max_file_bytes) + " bytes");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return bad("cannot be read (" + errno_text(errno) + ")");
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  std::string why;
  bool stale = false;
  if (!parse_tuning_file(text, out, why, stale)) return bad(stale ? "stale: " + why : why);
  if (out.context != context_)
    return bad("stale: written for another GPU or library versions (" + out.context + ")");
  if (out.entries.size() > limits_.max_entries) return bad("has too many entries");
  return ReadResult::Ok;
}

void TuningCache::load() {
  std::lock_guard<std::mutex> lock(mu_);
  if (loaded_ || !enabled()) return;
  loaded_ = true;
  TuningFile file;
  if (read_file(file, false) == ReadResult::Ok) entries_ = std::move(file.entries);
}

std::optional<std::string> TuningCache::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, v] : entries_)
    if (k == key) return v;
  return std::nullopt;
}

size_t TuningCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

namespace {
// Sets key's value (or removes it), keeping insertion order.
void apply(std::vector<std::pair<std::string, std::string>>& entries, const std::string& key,
           const std::optional<std::string>& value) {
  for (auto it = entries.begin(); it != entries.end(); ++it)
    if (it->first == key) {
      if (value)
        it->second = *value;
      else
        entries.erase(it);
      return;
    }
  if (value) entries.emplace_back(key, *value);
}
}  // namespace

void TuningCache::put(const std::string& key, const std::string& value) {
  if (!valid_tuning_token(key) || !valid_tuning_token(value)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled()) return;
  apply(entries_, key, value);
  pending_.emplace_back(key, value);
}

void TuningCache::erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled()) return;
  apply(entries_, key, std::nullopt);
  pending_.emplace_back(key, std::nullopt);
}

bool TuningCache::save() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled() || pending_.empty()) return true;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (!fs::is_directory(folder_, ec)) {
    warn_write_once("tuning cache folder " + folder_ + " is not a directory and cannot be created" +
                    (ec ? " (" + ec.message() + ")" : std::string()));
    return false;
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    warn_write_once("tuning cache " + path_ + " is not a regular file; not written");
    return false;
  }
  // Merge: what another writer saved since our load, then our changes on top.
  TuningFile merged;
  merged.context = context_;
  if (read_file(merged, true) != ReadResult::Ok) merged.entries.clear();
  merged.context = context_;
  for (const auto& [key, value] : pending_) apply(merged.entries, key, value);
  if (merged.entries.size() > limits_.max_entries)
    merged.entries.erase(merged.entries.begin(),
                         merged.entries.begin() + static_cast<std::ptrdiff_t>(
                                                      merged.entries.size() - limits_.max_entries));
  std::string text = serialize_tuning_file(merged);
  while (text.size() > limits_.max_file_bytes && !merged.entries.empty()) {
    merged.entries.erase(merged.entries.begin());
    text = serialize_tuning_file(merged);
  }

  static std::atomic<uint64_t> counter{0};
  const uint64_t salt =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::string tmp = path_ + ".tmp-" + std::to_string(::getpid()) + "-" +
                          std::to_string(counter.fetch_add(1)) + "-" +
                          hex64(fnv1a(std::to_string(salt)));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    warn_write_once("tuning cache folder " + folder_ + " is not writable (" + errno_text(errno) +
                    ")");
    return false;
  }
  bool ok = write_all(fd, text);
  ok = ::fsync(fd) == 0 && ok;
  const int write_errno = errno;
  ok = ::close(fd) == 0 && ok;
  if (ok && ::rename(tmp.c_str(), path_.c_str()) != 0) ok = false;
  if (!ok) {
    const int e = errno != 0 ? errno : write_errno;
    ::unlink(tmp.c_str());
    warn_write_once("tuning cache " + path_ + " could not be written (" + errno_text(e) + ")");
    return false;
  }
  entries_ = std::move(merged.entries);
  pending_.clear();
  return true;
}

size_t choose_fastest(TuningCache* cache, const std::string& key,
                      const std::vector<std::string>& names,
                      const std::function<double(size_t)>& time_ms, bool* timed) {
  if (timed != nullptr) *timed = false;
  if (names.empty()) return 0;
  if (cache != nullptr)
    if (const std::optional<std::string> stored = cache->find(key))
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == *stored) return i;  // anything else is stale: timed afresh
  size_t best = 0;
  double best_ms = 0.0;
  for (size_t i = 0; i < names.size(); ++i) {
    const double ms = time_ms(i);
    if (i == 0 || ms < best_ms) best = i, best_ms = ms;
  }
  if (timed != nullptr) *timed = true;
  if (cache != nullptr) cache->put(key, names[best]);
  return best;
}

}  // namespace encoder_kit
