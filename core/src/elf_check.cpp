#include "elf_check.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace encgraph {
namespace {

// The machine and byte order of the code this file is compiled to: a plugin must
// match both, whatever this build targets.
#if defined(__x86_64__)
constexpr unsigned kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr unsigned kMachine = EM_PPC64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr unsigned kMachine = EM_RISCV;
#elif defined(__s390x__)
constexpr unsigned kMachine = EM_S390;
#else
#error "encgraph: add this machine's ELF e_machine value to elf_check.cpp"
#endif
constexpr unsigned char kByteOrder =
    std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;

const std::string kRename = "remove it or rename it so it does not match libencgraph_*.so";

std::string rebuild_hint() {
  return "rebuild the plugin for " + elf_machine_name(kMachine);
}

std::string truncated(const std::string& what, uint64_t end, uint64_t size) {
  return "truncated: " + what + " ends at byte " + std::to_string(end) + " but the file has " +
         std::to_string(size) +
         " bytes (an interrupted copy or build?); rebuild the plugin or copy it again";
}

// Why a path that is not a regular file cannot be loaded; `st` is from stat().
std::string kind_problem(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "is a directory, not a shared library; " + kRename;
  if (S_ISFIFO(st.st_mode)) return "is a FIFO (named pipe), not a shared library; " + kRename;
  if (S_ISSOCK(st.st_mode)) return "is a socket, not a shared library; " + kRename;
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
    return "is a device node, not a shared library; " + kRename;
  return "not a regular file; " + kRename;
}

// Reads exactly `n` bytes at `offset`; false on a short read.
bool read_at(int fd, void* out, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// `offset + count * entry` without wrapping; UINT64_MAX when it would.
uint64_t table_end(uint64_t offset, uint64_t count, uint64_t entry) {
  if (entry != 0 && count > (UINT64_MAX - offset) / entry) return UINT64_MAX;
  return offset + count * entry;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string header_problem(int fd, uint64_t size) {
  unsigned char ident[EI_NIDENT] = {};
  const bool has_ident = size >= EI_NIDENT && read_at(fd, ident, EI_NIDENT, 0);
  if (size < 4 || !(has_ident || read_at(fd, ident, 4, 0)) || std::memcmp(ident, ELFMAG, SELFMAG))
    return "not a shared library (no ELF header); " + kRename;
  if (!has_ident) return truncated("its ELF identification", EI_NIDENT, size);
  if (ident[EI_CLASS] == ELFCLASS32)
    return "a 32-bit ELF file (ELFCLASS32); this runtime loads 64-bit plugins only: " +
           rebuild_hint();
  if (ident[EI_CLASS] != ELFCLASS64)
    return "an ELF file of unknown class " + std::to_string(ident[EI_CLASS]) +
           " (a damaged file?); " + rebuild_hint();
  if (ident[EI_DATA] != kByteOrder)
    return std::string(ident[EI_DATA] == ELFDATA2MSB ? "a big-endian" : "an unknown byte order") +
           " ELF file; this machine is " +
           (kByteOrder == ELFDATA2LSB ? "little-endian: " : "big-endian: ") + rebuild_hint();

  Elf64_Ehdr eh{};
  if (size < sizeof(eh) || !read_at(fd, &eh, sizeof(eh), 0))
    return truncated("its ELF header", sizeof(eh), size);
  if (eh.e_type != ET_DYN) {
    const char* kind = eh.e_type == ET_EXEC   ? "an executable (ET_EXEC)"
                       : eh.e_type == ET_REL  ? "an object file (ET_REL)"
                       : eh.e_type == ET_CORE ? "a core dump (ET_CORE)"
                                              : "an ELF file of unknown type";
    return std::string(kind) + " (e_type " + std::to_string(eh.e_type) +
           "), not a shared library: build it as a shared library (encgraph_add_plugin)";
  }
  if (eh.e_machine != kMachine)
    return "built for " + elf_machine_name(eh.e_machine) + " (e_machine " +
           std::to_string(eh.e_machine) + "); this machine is " + elf_machine_name(kMachine) +
           ": " + rebuild_hint();

  if (eh.e_phnum == 0 || eh.e_phnum == PN_XNUM || eh.e_phentsize != sizeof(Elf64_Phdr))
    return "its ELF header has no usable program header table (e_phnum " +
           std::to_string(eh.e_phnum) + ", e_phentsize " + std::to_string(eh.e_phentsize) +
           "): a damaged file; " + rebuild_hint();
  const uint64_t ph_end = table_end(eh.e_phoff, eh.e_phnum, sizeof(Elf64_Phdr));
  if (ph_end > size) return truncated("its program header table", ph_end, size);
  if (eh.e_shoff != 0) {
    // e_shnum 0 with a table present means "count in section 0": one entry at least.
    const uint64_t count = eh.e_shnum == 0 ? 1 : eh.e_shnum;
    if (eh.e_shentsize != sizeof(Elf64_Shdr))
      return "its section header entries are " + std::to_string(eh.e_shentsize) + " bytes, not " +
             std::to_string(sizeof(Elf64_Shdr)) + ": a damaged file; " + rebuild_hint();
    const uint64_t sh_end = table_end(eh.e_shoff, count, sizeof(Elf64_Shdr));
    if (sh_end > size) return truncated("its section header table", sh_end, size);
  }

  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!read_at(fd, ph.data(), ph.size() * sizeof(Elf64_Phdr), eh.e_phoff))
    return truncated("its program header table", ph_end, size);
  bool loadable = false;
  for (size_t k = 0; k < ph.size(); ++k) {
    if (ph[k].p_type != PT_LOAD) continue;
    loadable = true;
    const uint64_t end = table_end(ph[k].p_offset, 1, ph[k].p_filesz);
    if (end > size) return truncated("its loadable segment " + std::to_string(k), end, size);
  }
  if (!loadable) return "has no loadable segment (no PT_LOAD): not a shared library; " + kRename;
  return {};
}

}  // namespace

std::string elf_machine_name(unsigned machine) {
  switch (machine) {
    case EM_386: return "x86 (32-bit)";
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_ARM: return "ARM (32-bit)";
    case EM_PPC64: return "PowerPC64";
    case EM_PPC: return "PowerPC";
    case EM_RISCV: return "RISC-V";
    case EM_S390: return "s390x";
    case EM_MIPS: return "MIPS";
    case EM_SPARCV9: return "SPARC V9";
#ifdef EM_LOONGARCH
    case EM_LOONGARCH: return "LoongArch";
#endif
    default: return "machine " + std::to_string(machine);
  }
}

unsigned this_elf_machine() {
  return kMachine;
}

std::string elf_problem(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    const int err = errno;
    struct stat lst {};
    if (err == ENOENT && ::lstat(file.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      std::error_code ec;
      const fs::path target = fs::read_symlink(file, ec);
      return "a symbolic link to '" + target.string() +
             "', which does not exist (dangling); remove the link or point it at a plugin";
    }
    if (err == ENOENT) return "does not exist";
    return std::string("cannot be read: ") + std::strerror(err);
  }
  if (!S_ISREG(st.st_mode)) return kind_problem(st);
  // O_NONBLOCK: should the path turn into a FIFO after the stat, open() does not wait.
  const Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) return std::string("cannot be opened: ") + std::strerror(errno);
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return kind_problem(st);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0)
    return "is empty (0 bytes), not a shared library (an interrupted copy or build?); rebuild "
           "the plugin or copy it again, or remove the file";
  return header_problem(fd.get(), size);
}

}  // namespace encgraph
