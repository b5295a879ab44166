#include "output_files.hpp"

#include "input_files.hpp"
#include "toml_util.hpp"

#include <encgraph/error.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <vector>

namespace encgraph::host {
namespace fs = std::filesystem;
namespace {

// ---- staging files (and the folders made for them) removed on a fatal signal ----
// The handler may only make async-signal-safe calls: the paths live in fixed
// buffers, each slot's state is a lock-free atomic.
constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096;
enum SlotState { kFree = 0, kClaimed = 1, kActive = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  bool folder = false;  // a folder made for an output: removed after the files, if empty
  char path[kPathBytes];
};
Slot g_slots[kSlots];
// SIGINT, SIGTERM, SIGHUP always; the others (which end the process by
// default too: a closed pipe, a CPU-time limit, ...) only where nothing else
// handles them.
constexpr int kSignals[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGPIPE,
                            SIGXCPU, SIGALRM, SIGUSR1, SIGUSR2};
constexpr size_t kAlwaysHandled = 3;
struct sigaction g_previous[std::size(kSignals)];

extern "C" void remove_staging_and_reraise(int sig) {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == kActive && !s.folder) ::unlink(s.path);
  // Folders, innermost first: a pass removes those already empty.
  for (int pass = 0; pass < kSlots; ++pass) {
    bool removed = false;
    for (Slot& s : g_slots)
      if (s.state.load(std::memory_order_acquire) == kActive && s.folder && ::rmdir(s.path) == 0) {
        s.state.store(kFree, std::memory_order_release);
        removed = true;
      }
    if (!removed) break;
  }
  // The previous disposition (usually the default: terminate) then handles the
  // signal as if we had not been there, so the exit status still says SIGINT.
  for (size_t i = 0; i < std::size(kSignals); ++i)
    if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  ::raise(sig);
}

// Installs the handler wherever it is not the current one: on the first
// staging file, and again should something (a plugin, a test framework) have
// replaced it since. Signals stay blocked while the previous disposition the
// handler restores is updated.
void install_handlers() {
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  sigset_t all, old_mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction current {};
    ::sigaction(kSignals[i], nullptr, &current);
    if (current.sa_handler == SIG_IGN) continue;  // e.g. SIGHUP under nohup: stay immune
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == remove_staging_and_reraise)
      continue;
    if (i >= kAlwaysHandled && ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL))
      continue;
    g_previous[i] = current;
    struct sigaction act {};
    act.sa_handler = remove_staging_and_reraise;
    sigfillset(&act.sa_mask);
    ::sigaction(kSignals[i], &act, nullptr);
  }
  // Over a file-size limit (ulimit -f) a write then fails with EFBIG, which
  // names the file, instead of SIGXFSZ killing the process mid-write.
  struct sigaction xfsz {};
  ::sigaction(SIGXFSZ, nullptr, &xfsz);
  if (!(xfsz.sa_flags & SA_SIGINFO) && xfsz.sa_handler == SIG_DFL) ::signal(SIGXFSZ, SIG_IGN);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

int register_staging(const std::string& path, bool folder = false) {
  install_handlers();
  if (path.size() >= kPathBytes) return -1;  // the destructor still removes it
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kClaimed)) continue;
    g_slots[i].folder = folder;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(kActive, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_staging(int slot) {
  if (slot >= 0) g_slots[slot].state.store(kFree, std::memory_order_release);
}

// The unique part of a staging file's name: the process id (no two live
// processes share it) and 64 random bits (another host on a shared folder,
// a leftover of a dead process with the same id).
std::string staging_suffix() {
  static std::atomic<uint64_t> counter{0};
  uint64_t r = 0;
  if (::getrandom(&r, sizeof(r), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(r)))
    r = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  r ^= counter.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%ld-%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(r));
  return buf;
}

// ---- checks ----

[[noreturn]] void refuse(const NamedFile& f, const std::string& why) {
  throw Error(ErrorKind::Input, f.what + " '" + printable(f.path.string()) + "' " + why);
}

fs::path folder_of(const fs::path& p) {
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

// The permission bits a new output gets: what the user's umask allows (staging
// creates 0600). Read from /proc so as not to set the process umask.
mode_t new_file_mode() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(0666 & ~std::strtoul(line.c_str() + 6, nullptr, 8));
  return 0644;
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// A write that failed. No space, a size limit or a failing disk is not the
// user's input (exit 1, kind Device); a path that cannot be written (no
// permission, a read-only file system) is (exit 2).
[[noreturn]] void write_failed(const NamedFile& f, const std::string& action, int err) {
  std::string why = "cannot be written: " + action + errno_text(err);
  ErrorKind kind = ErrorKind::Device;
  if (err == ENOSPC || err == EDQUOT)
    why += "; free space on the disk holding '" + printable(folder_of(f.path).string()) +
           "' or name an output on another disk (nothing was replaced)";
  else if (err == EFBIG)
    why +=
        "; the file outgrew a size limit (ulimit -f, or the file system's): raise it or "
        "write to another disk (nothing was replaced)";
  else if (err == EIO)
    why += "; the disk reported an I/O error (nothing was replaced)";
  else
    kind = ErrorKind::Input;
  throw Error(kind, f.what + " '" + printable(f.path.string()) + "' " + why);
}

}  // namespace

size_t registered_staging_files() {
  size_t n = 0;
  for (const Slot& s : g_slots) n += s.state.load() == kActive && !s.folder;
  return n;
}

void check_output_target(const NamedFile& target) {
  struct stat st {};
  if (::stat(target.path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      refuse(target, "is " + file_kind(st.st_mode) +
                         ", not a regular file: encgraph writes outputs only as regular files "
                         "(replacing one when the run completes); name a file");
    // Replacing goes through the folder, which a file's own permissions do not
    // guard: a file made read-only to keep it is kept, as `cp` or `>` would.
    if (::access(target.path.c_str(), W_OK) != 0 && errno == EACCES)
      refuse(target,
             "is read-only (its permissions forbid writing it): make it writable or "
             "remove it if it is to be replaced, or name another file");
  } else if (errno != ENOENT && errno != ENOTDIR) {
    refuse(target, "cannot be checked: " + errno_text(errno));
  }
  // "out/" or "out/." names a folder even before it exists.
  const std::string name = target.path.filename().string();
  if (name.empty() || name == "." || name == "..")
    refuse(target, "names a folder, not a file (it ends in '" + (name.empty() ? "/" : name) +
                       "'): name the file to write, e.g. '" +
                       printable((target.path / "output").lexically_normal().string()) + "'");
  // The nearest existing folder must be a folder we may write into (the
  // missing ones are created).
  fs::path folder = folder_of(target.path);
  while (true) {
    struct stat ds {};
    if (::stat(folder.c_str(), &ds) == 0) {
      if (!S_ISDIR(ds.st_mode))
        refuse(target, "cannot be written: '" + printable(folder.string()) + "' is " +
                           file_kind(ds.st_mode) + ", not a folder");
      if (::access(folder.c_str(), W_OK | X_OK) != 0)
        refuse(target, "cannot be written: the folder '" + printable(folder.string()) +
                           "' is not writable (" + errno_text(errno) +
                           "); name a file in a folder you may write to");
      return;
    }
    if (errno != ENOENT && errno != ENOTDIR)
      refuse(target, "cannot be written: its folder '" + printable(folder.string()) +
                         "' cannot be checked (" + errno_text(errno) + ")");
    // A missing folder is made, but not through a dangling symlink.
    std::error_code ec;
    if (fs::is_symlink(folder, ec))
      refuse(target, "cannot be written: its folder '" + printable(folder.string()) +
                         "' is a symlink to '" + printable(fs::read_symlink(folder, ec).string()) +
                         "', which does not exist; create that folder or name another output");
    if (folder.has_parent_path() && folder.parent_path() != folder)
      folder = folder.parent_path();
    else if (folder.is_relative() && folder != ".")
      folder = ".";  // "out/e.st" with "out" missing: the working folder must be writable
    else
      return;
  }
}

void check_outputs_distinct(const std::vector<NamedFile>& outputs,
                            const std::vector<NamedFile>& inputs) {
  std::vector<FileIdentity> out_ids;
  for (const auto& o : outputs) out_ids.push_back(file_identity(o.path));
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t k = i + 1; k < outputs.size(); ++k)
      if (out_ids[i] == out_ids[k] || out_ids[i].canonical == out_ids[k].canonical)
        throw Error(ErrorKind::Input,
                    "the " + outputs[i].what + " '" + printable(outputs[i].path.string()) +
                        "' and the " + outputs[k].what + " '" +
                        printable(outputs[k].path.string()) +
                        "' are the same file; one would overwrite the other: give each output "
                        "its own file");
  // An output inside another (-o out --report out/r.json) would turn the
  // other's path into a folder only when the run ends.
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t k = 0; k < outputs.size(); ++k) {
      const auto rel = out_ids[k].canonical.lexically_relative(out_ids[i].canonical);
      if (i != k && !rel.empty() && *rel.begin() != ".." && rel != ".")
        throw Error(ErrorKind::Input,
                    "the " + outputs[k].what + " '" + printable(outputs[k].path.string()) +
                        "' lies inside the " + outputs[i].what + " '" +
                        printable(outputs[i].path.string()) +
                        "', which is written as a file: give the outputs paths outside each "
                        "other");
    }
  // An output that does not exist yet cannot be an existing input; for the
  // others, each input is looked at once however often it is named.
  if (std::none_of(out_ids.begin(), out_ids.end(), [](const FileIdentity& o) { return o.exists; }))
    return;
  std::set<std::string> seen;
  for (const auto& in : inputs) {
    if (!seen.insert(in.path.string()).second) continue;
    struct stat st {};
    if (::stat(in.path.c_str(), &st) != 0) continue;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const FileIdentity& o = out_ids[i];
      if (!o.exists) continue;
      // Both exist: one inode is one file, whatever the paths (links, ./x).
      if (o.device == static_cast<uint64_t>(st.st_dev) &&
          o.inode == static_cast<uint64_t>(st.st_ino))
        throw Error(ErrorKind::Input,
                    "the " + outputs[i].what + " '" + printable(outputs[i].path.string()) +
                        "' is the " + in.what + " '" + printable(in.path.string()) +
                        "' (the same file): writing it would destroy that input; name another "
                        "output file");
      if (S_ISDIR(st.st_mode)) {
        // An existing file under an input folder (a weights folder) is part of it.
        std::error_code ec;
        const fs::path in_canonical = fs::weakly_canonical(fs::absolute(in.path, ec), ec);
        const auto rel = o.canonical.lexically_relative(in_canonical);
        if (!rel.empty() && *rel.begin() != "..")
          throw Error(ErrorKind::Input,
                      "the " + outputs[i].what + " '" + printable(outputs[i].path.string()) +
                          "' lies inside the " + in.what + " '" + printable(in.path.string()) +
                          "' (a folder the run reads): writing it could destroy that input; "
                          "name an output file outside it");
      }
    }
  }
}

StagedFile::StagedFile(fs::path target, std::string what)
    : target_(std::move(target)), final_(target_), what_(std::move(what)) {
  const NamedFile named{what_, target_};
  check_output_target(named);
  // Through a symlink the file it names is written (made, when the link
  // dangles), never the link replaced by a file.
  std::error_code ec;
  if (fs::is_symlink(target_, ec)) final_ = follow_symlinks(target_);
  const fs::path folder = folder_of(final_);
  // The staging name keeps the target's name (bounded: a name may hold 255
  // bytes) so that a file left by a SIGKILL says whose it was.
  const std::string name = final_.filename().string().substr(0, 200);
  // The staging file is registered with the signal handler before it is
  // created: a fatal signal between creating and registering it would leave
  // it behind. Hence a name made here (mkstemp names and creates in one
  // step) and created with O_EXCL; a name taken already is registered for a
  // moment only, and is not another live process's (staging_suffix).
  install_handlers();
  // A folder another run made may vanish when that run fails and removes
  // it again: then it is made anew (a few tries).
  for (int attempt = 0, missing = 0; fd_ < 0; ++attempt) {
    make_folders(named, folder);
    const std::string path =
        (folder / (name + ".encgraph-" + staging_suffix() + ".partial")).string();
    const int slot = register_staging(path);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ >= 0) {
      staging_ = path;
      slot_ = slot;
      break;
    }
    const int err = errno;
    unregister_staging(slot);
    if ((err == EEXIST && attempt < 16) || (err == ENOENT && ++missing <= 3)) continue;
    discard();
    write_failed(named,
                 "creating a staging file in '" + printable(folder.string()) + "' failed: ", err);
  }
  struct stat st {};
  const mode_t mode = ::stat(final_.c_str(), &st) == 0 ? (st.st_mode & 07777) : new_file_mode();
  (void)::fchmod(fd_, mode);  // best effort: the content matters, not the bits
}

void StagedFile::make_folders(const NamedFile& named, const fs::path& folder) {
  // Folders made here are removed again unless the file is committed: a
  // failed run leaves nothing behind.
  std::error_code ec;
  std::vector<fs::path> missing;
  for (fs::path f = folder; !f.empty() && !fs::exists(f, ec); f = f.parent_path()) {
    missing.push_back(fs::absolute(f, ec));
    if (f == f.parent_path()) break;
  }
  for (const fs::path& f : missing) {  // innermost first
    made_folders_.push_back(f);
    folder_slots_.push_back(register_staging(f.string(), true));
  }
  fs::create_directories(folder, ec);
  if (ec) {
    forget_folders(true);
    write_failed(named,
                 "creating its folder '" + printable(folder.string()) + "' failed: ", ec.value());
  }
}

StagedFile::~StagedFile() {
  discard();
}

void StagedFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!staging_.empty()) ::unlink(staging_.c_str());
  staging_.clear();
  unregister_staging(slot_);
  slot_ = -1;
  forget_folders(true);
}

void StagedFile::forget_folders(bool remove) noexcept {
  // Innermost first; one that now holds a file (a committed output, another
  // run's) stays.
  if (remove)
    for (const auto& f : made_folders_) ::rmdir(f.c_str());
  for (int slot : folder_slots_) unregister_staging(slot);
  made_folders_.clear();
  folder_slots_.clear();
}

void StagedFile::write(const void* data, size_t bytes) {
  if (fd_ < 0) throw Error(ErrorKind::Internal, "write to a closed staging file");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) write_failed({what_, target_}, "", n < 0 ? errno : EIO);
    p += n;
    bytes -= static_cast<size_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
}

void StagedFile::append(const StagedFile& other, uint64_t bytes) {
  // copy_file_range keeps the bytes in the kernel (or shares extents);
  // where it is not supported, pread and write.
  loff_t in = 0;
  while (bytes > 0) {
    const ssize_t n = ::copy_file_range(other.fd_, &in, fd_, nullptr, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes -= static_cast<uint64_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
  std::vector<char> buf(1 << 20);
  while (bytes > 0) {
    const ssize_t n = ::pread(other.fd_, buf.data(), std::min<uint64_t>(bytes, buf.size()), in);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      write_failed({what_, target_},
                   "reading back '" + printable(other.staging_.string()) + "' failed: ",
                   n < 0 ? errno : EIO);
    write(buf.data(), static_cast<size_t>(n));
    in += n;
    bytes -= static_cast<uint64_t>(n);
  }
}

void StagedFile::commit() {
  const NamedFile named{what_, target_};
  if (fd_ < 0) throw Error(ErrorKind::Internal, "commit of a closed staging file");
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    const int err = errno;
    fd_ = -1;
    discard();
    write_failed(named, "", err);
  }
  fd_ = -1;
  // Something may have appeared at the target during the run; a directory or
  // device there is not replaced.
  struct stat st {};
  if (::stat(final_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    discard();
    refuse(named, "became " + file_kind(st.st_mode) + " during the run; it was not replaced");
  }
  if (::rename(staging_.c_str(), final_.c_str()) != 0) {
    const int err = errno;
    discard();
    write_failed(named, "renaming it into place failed: ", err);
  }
  staging_.clear();
  unregister_staging(slot_);
  slot_ = -1;
  forget_folders(false);
  // The rename itself reaches the disk with the folder's metadata.
  const int dir = ::open(folder_of(final_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

}  // namespace encgraph::host
