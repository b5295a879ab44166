// Opening what the user names as an input: only regular files are read (a FIFO
// would block forever, a device or /dev/zero would never end, a directory is a
// typo), text inputs are capped, and every error names the file, what it was
// meant to be, and the fix.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace encgraph::host {

// "a directory", "a FIFO (named pipe)", "a character device", ... for a
// stat() mode that is not a regular file.
std::string file_kind(unsigned mode);

// Throws an Input error unless `file` exists and is a regular file (after
// following symlinks). `what` says what the file was meant to be ("config",
// "trace", "image"), e.g. "trace 'x.jsonl' is a directory: name a JSONL file".
void require_regular_file(const std::filesystem::path& file, const std::string& what);

// The whole file as text, after require_regular_file; a file over `max_bytes`
// is refused with both sizes and the key that sets the limit.
std::string read_text_input(const std::filesystem::path& file, const std::string& what,
                            int64_t max_bytes,
                            const std::string& limit_key = "limits.max_text_bytes");

// Where a chain of symlinks ends (at most 40 links), whether or not that file
// exists; `file` itself when it is not a symlink.
std::filesystem::path follow_symlinks(const std::filesystem::path& file);

// Identity of a file for "is this output one of the inputs?": device and
// inode when it exists, else the weakly canonical path (through a dangling
// symlink, the path it names).
struct FileIdentity {
  bool exists = false;
  uint64_t device = 0;
  uint64_t inode = 0;
  std::filesystem::path canonical;
  bool operator==(const FileIdentity& o) const;
};
FileIdentity file_identity(const std::filesystem::path& file);

}  // namespace encgraph::host
