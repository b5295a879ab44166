#include <encoder_kit/error.hpp>
#include <encoder_kit/input_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace encoder_kit {
namespace fs = std::filesystem;

namespace {

std::string kind_of_mode(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

// Errors about what the user named are theirs to fix (INVALID_ARGUMENT: exit
// 2); a failing disk is not (IO).
eg_status status_of(int err) {
  return err == EIO ? EG_ERR_IO : EG_ERR_INVALID_ARGUMENT;
}

[[noreturn]] void refuse_kind(const std::string& head, mode_t mode, const std::string& fix) {
  fail(EG_ERR_INVALID_ARGUMENT, head + " is " + kind_of_mode(mode) +
                                    (S_ISDIR(mode) ? "" : ", not a regular file") + ": " + fix);
}

}  // namespace

FileKind file_kind(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileKind::Missing;
  if (S_ISREG(st.st_mode)) return FileKind::Regular;
  if (S_ISDIR(st.st_mode)) return FileKind::Directory;
  return FileKind::Other;
}

std::string special_file_kind(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return kind_of_mode(st.st_mode);
}

ReadOnlyFile::ReadOnlyFile(const fs::path& path, const std::string& key, const std::string& fix) {
  const std::string head = key + " '" + path.string() + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      fail(EG_ERR_INVALID_ARGUMENT, head + " does not exist: " + fix);
    fail(status_of(e), head + " cannot be read: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) refuse_kind(head, st.st_mode, fix);
  // O_NONBLOCK: should a FIFO replace the file after the check, open() returns.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd_ < 0) {
    const int e = errno;
    fail(status_of(e), head + " cannot be opened: " + std::strerror(e));
  }
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t mode = st.st_mode;
    ::close(fd_);
    fd_ = -1;
    refuse_kind(head, mode, fix);
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string read_text_input(const fs::path& path, const std::string& key, const std::string& fix,
                            int64_t max_bytes) {
  const ReadOnlyFile file(path, key, fix);
  const std::string head = key + " '" + path.string() + "'";
  auto too_large = [&](const std::string& size) {
    fail(EG_ERR_INVALID_ARGUMENT, head + " is " + size + " bytes, over the limit of " +
                                      std::to_string(max_bytes) +
                                      " bytes for a JSON input: name the right file");
  };
  if (file.size() > static_cast<uint64_t>(max_bytes)) too_large(std::to_string(file.size()));
  std::string text;
  text.resize(static_cast<size_t>(file.size()) + 1);  // one more: a file that grew shows
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(file.fd(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      fail(status_of(e), head + " cannot be read: " + std::strerror(e));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got > static_cast<size_t>(max_bytes)) too_large("more than " + std::to_string(max_bytes));
    if (got == text.size())
      text.resize(std::min(text.size() * 2, static_cast<size_t>(max_bytes) + 1));
  }
  text.resize(got);
  return text;
}

}  // namespace encoder_kit
