// Opening the files a plugin's configuration names (plugin.weights, its shards
// and index, config_json). Only regular files are read: a FIFO would block
// forever, /dev/zero would never end, a directory is a typo. JSON inputs are
// capped. Every error names the key the path came from and the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace encoder_kit {

// The most bytes a JSON input (config_json, a *.index.json) may have; real
// ones are kilobytes. docs/writing-a-plugin.md documents it.
inline constexpr int64_t kMaxJsonInputBytes = int64_t{16} << 20;

enum class FileKind { Missing, Regular, Directory, Other };

// What `path` is, following symlinks (stat only: nothing is opened).
FileKind file_kind(const std::filesystem::path& path);

// "a FIFO", "a character device", ...: what a non-regular, non-directory file is.
std::string special_file_kind(const std::filesystem::path& path);

// A regular file opened read-only. The path is checked with stat() before
// open() (opening a FIFO blocks, opening a device can act), and again with
// fstat() on the descriptor, so a file swapped in between is refused too.
// Errors (INVALID_ARGUMENT) read "<key> '<path>' is a directory: <fix>".
class ReadOnlyFile {
 public:
  // `key`: where the path came from ("plugin.weights", "config_json").
  // `fix`: what to name instead, ending the message of a wrong kind of file.
  ReadOnlyFile(const std::filesystem::path& path, const std::string& key, const std::string& fix);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole regular file as text; a file over `max_bytes` is refused naming
// both sizes (and never read past the limit, whatever its size claims).
std::string read_text_input(const std::filesystem::path& path, const std::string& key,
                            const std::string& fix, int64_t max_bytes = kMaxJsonInputBytes);

}  // namespace encoder_kit
