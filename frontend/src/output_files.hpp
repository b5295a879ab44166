// Writing what a command produces without damaging what it reads or a good
// earlier result: outputs are checked before any work (an existing target must
// be a regular file, and no output may be an input or the other output), and
// written under a unique staging name in the target's folder, synced and
// renamed into place when complete. Staging files, and the folders made for
// them, are removed on any error and on SIGINT, SIGTERM, SIGHUP (and the other
// signals that end the process by default, where nothing else handles them).
// A full disk, a size limit or an I/O error is an Error of kind Device (exit
// 1); a path that cannot be written, of kind Input (exit 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace encgraph::host {

// A file as messages name it: `what` says what it is ("config", "image",
// "report"), `path` where it is, as the user gave it.
struct NamedFile {
  std::string what;
  std::filesystem::path path;
};

// Throws an Input error, touching nothing, when `target` exists and is not a
// regular file (a directory, a device, a FIFO, ...), or when its folder cannot
// hold it (a parent is a file, or the nearest existing folder is not writable).
void check_output_target(const NamedFile& target);

// Throws an Input error when an output is one of the inputs or two outputs are
// one file: compared by device and inode (hard links, symlinks) and by
// canonical path (./x and x, outputs not written yet). An input folder (a
// weights folder) holds every existing file under it.
void check_outputs_distinct(const std::vector<NamedFile>& outputs,
                            const std::vector<NamedFile>& inputs);

// A file being written: a unique staging file (created with O_EXCL) next to
// the target, registered for removal on a fatal signal before it exists;
// commit() syncs it and renames it
// over the target, so that the target is always either its old content or
// one run's complete output, whatever other processes write there.
class StagedFile {
 public:
  StagedFile(std::filesystem::path target, std::string what);
  ~StagedFile();  // removes the staging file unless committed
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  // Appends bytes; an error names the target (disk full, ...).
  void write(const void* data, size_t bytes);
  // Appends the first `bytes` bytes of `other`'s staging file.
  void append(const StagedFile& other, uint64_t bytes);
  uint64_t size() const { return size_; }
  const std::filesystem::path& staging_path() const { return staging_; }
  const std::filesystem::path& target() const { return target_; }

  // fsync, check the target is still a regular file or absent, rename, sync
  // the folder. After it the staging file is gone.
  void commit();
  // Removes the staging file and the folders made for it (also what the
  // destructor does).
  void discard() noexcept;

 private:
  void make_folders(const NamedFile& named, const std::filesystem::path& folder);
  void forget_folders(bool remove) noexcept;

  std::filesystem::path target_;  // as given, for messages
  std::filesystem::path final_;   // where the rename goes (a symlink's target)
  std::string what_;
  std::filesystem::path staging_;
  int fd_ = -1;
  int slot_ = -1;                                    // in the signal-cleanup registry
  std::vector<std::filesystem::path> made_folders_;  // made for the target, innermost first
  std::vector<int> folder_slots_;                    // theirs in the registry
  uint64_t size_ = 0;
};

// Staging files currently registered for removal on a signal (for tests).
size_t registered_staging_files();

}  // namespace encgraph::host
