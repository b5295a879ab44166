#include "id_file.hpp"

#include "poll_deadline.hpp"

#include <encgraph/process_group.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace encgraph {
namespace {

constexpr const char* kMagic = "encgraph-nccl-id 1";
constexpr const char* kKey = "distributed.id_file";

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool unhex(const std::string& text, std::string& out) {
  if (text.size() % 2) return false;
  out.clear();
  for (size_t i = 0; i < text.size(); i += 2) {
    auto nibble = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

struct Parsed {
  bool ok = false;
  std::string job, id;
  int world = 0;
};

Parsed parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string magic, job_line, world_line, id_line;
  if (!std::getline(in, magic) || magic != kMagic) return p;
  if (!std::getline(in, job_line) || job_line.rfind("job ", 0) != 0) return p;
  if (!std::getline(in, world_line) || world_line.rfind("world ", 0) != 0) return p;
  // The writer ends the id line with a newline: a copy cut short anywhere,
  // even between two hex digits, must not pass for a shorter id.
  if (!std::getline(in, id_line) || in.eof() || !unhex(id_line, p.id) || p.id.empty()) return p;
  p.job = job_line.substr(4);
  try {
    p.world = std::stoi(world_line.substr(6));
  } catch (const std::exception&) {
    return p;
  }
  p.ok = true;
  return p;
}

// The first 4096 bytes of the file at `path` and its time, read without
// blocking: a FIFO or a device at the path must not hold a wait bounded by
// distributed.timeout_s (nor rank 0's exit). Returns "" or what is there instead.
std::string read_head(const std::string& path, std::string& text, double& mtime) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR
               ? "no file"
               : std::string("a file it cannot read (") + std::strerror(errno) + ")";
  std::string found;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    found = "not a regular file";
  } else {
    text.clear();
    char buffer[4096];
    ssize_t n = 0;
    while (text.size() < sizeof buffer && (n = ::read(fd, buffer, sizeof buffer - text.size())) > 0)
      text.append(buffer, static_cast<size_t>(n));
    mtime = static_cast<double>(st.st_mtime);
  }
  ::close(fd);
  return found;
}

std::string contents(const std::string& job_id, int world, const std::string& id) {
  return std::string(kMagic) + "\njob " + job_id + "\nworld " + std::to_string(world) + "\n" +
         hex(id) + "\n";
}

}  // namespace

void publish_id_file(const std::string& path, const std::string& job_id, int world_size,
                     const std::string& id) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmpl = (folder / (".encgraph-id.XXXXXX")).string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0)
    throw_config(kKey + std::string(" = \"") + path + "\": cannot create a file in '" +
                 folder.string() + "' (" + std::strerror(errno) +
                 "); name a writable folder every rank sees");
  const std::string text = contents(job_id, world_size, id);
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  close(fd);
  if (!written || std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmpl.c_str());
    throw_config(kKey + std::string(" = \"") + path + "\": cannot write it (" + std::strerror(e) +
                 "); name a writable file on a filesystem every rank sees");
  }
}

std::string wait_id_file(const std::string& path, const std::string& job_id, int world_size,
                         double timeout_s, int rank, double not_before,
                         const std::function<void()>& poll) {
  const PollDeadline deadline(timeout_s);
  for (;;) {
    if (poll) poll();
    std::string text;
    double mtime = 0.0;
    std::string seen = read_head(path, text, mtime);
    if (seen.empty()) {
      const Parsed p = parse(text);
      if (!p.ok) {
        seen = "a file that is not an encgraph id file";
      } else if (p.job != job_id) {
        seen = "the id of job '" + p.job + "', not of job '" + job_id + "'";
      } else if (job_id.empty() && mtime < not_before) {
        seen = "a file older than this process (left by an earlier job?)";
      } else if (p.world != world_size) {
        throw_config("rank " + std::to_string(rank) + ": " + kKey + " '" + path +
                     "' holds the id of a job of " + std::to_string(p.world) +
                     " ranks, but WORLD_SIZE is " + std::to_string(world_size) +
                     ": every rank must be started with the same WORLD_SIZE");
      } else {
        return p.id;
      }
    }
    if (deadline.passed())
      throw GroupTimeout("rank " + std::to_string(rank) + ": rank 0's NCCL id did not appear in " +
                         kKey + " '" + path + "' within " + format_seconds(timeout_s) +
                         " (distributed.timeout_s); found " + seen +
                         ". Check that rank 0 started, that the path is on a filesystem every "
                         "rank sees, and that every rank has the same job id "
                         "(distributed.job_id or ENCGRAPH_JOB_ID / SLURM_JOB_ID)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void remove_id_file(const std::string& path, const std::string& id) noexcept {
  try {
    std::string text;
    double mtime = 0.0;
    if (!read_head(path, text, mtime).empty()) return;
    const Parsed p = parse(text);
    if (p.ok && p.id == id) std::filesystem::remove(path);
  } catch (...) {
  }
}

}  // namespace encgraph
