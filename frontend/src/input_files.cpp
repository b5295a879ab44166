#include "input_files.hpp"

#include "toml_util.hpp"

#include <encgraph/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace encgraph::host {
namespace {

[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& what,
                         const std::string& why) {
  throw Error(ErrorKind::Input, what + " '" + printable(file.string()) + "' " + why);
}

// "an image file", "a trace file".
std::string a_file(const std::string& what) {
  const bool vowel = !what.empty() && std::string("aeiou").find(what[0]) != std::string::npos;
  return (vowel ? "an " : "a ") + what + " file";
}

}  // namespace

std::string file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

void require_regular_file(const std::filesystem::path& file, const std::string& what) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) refuse(file, what, "does not exist: check the path");
    refuse(file, what, std::string("cannot be read: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode))
    refuse(file, what,
           "is " + file_kind(st.st_mode) + ", not a regular file: name " + a_file(what));
}

std::string read_text_input(const std::filesystem::path& file, const std::string& what,
                            int64_t max_bytes, const std::string& limit_key) {
  require_regular_file(file, what);
  // O_NONBLOCK: should the file be swapped for a FIFO after the check, the open
  // does not wait for a writer; fstat below sees what was really opened.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) refuse(file, what, std::string("cannot be opened: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(file, what, "is not a regular file: name " + a_file(what));
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    refuse(file, what,
           "is " + std::to_string(st.st_size) + " bytes, over the limit of " +
               std::to_string(max_bytes) + " bytes for a " + what + " (" + limit_key + " sets it)");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      refuse(file, what, std::string("cannot be read: ") + std::strerror(err));
    }
    if (n == 0) break;  // shrank while read: take what is there
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(done);
  return text;
}

bool FileIdentity::operator==(const FileIdentity& o) const {
  if (exists && o.exists) return device == o.device && inode == o.inode;
  return canonical == o.canonical;
}

std::filesystem::path follow_symlinks(const std::filesystem::path& file) {
  std::filesystem::path p = file;
  std::error_code ec;
  for (int hop = 0; hop < 40 && std::filesystem::is_symlink(p, ec); ++hop) {
    const std::filesystem::path next = std::filesystem::read_symlink(p, ec);
    if (ec) break;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  return p;
}

FileIdentity file_identity(const std::filesystem::path& file) {
  FileIdentity id;
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) {
    id.exists = true;
    id.device = static_cast<uint64_t>(st.st_dev);
    id.inode = static_cast<uint64_t>(st.st_ino);
  }
  std::error_code ec;
  id.canonical =
      std::filesystem::weakly_canonical(std::filesystem::absolute(follow_symlinks(file), ec), ec);
  return id;
}

}  // namespace encgraph::host
