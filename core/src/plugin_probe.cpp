#include "plugin_probe.hpp"

#include <encgraph/blas_kernels.hpp>
#include <encgraph/error.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace fs = std::filesystem;

namespace encgraph {
namespace {

// ---------------------------------------------------------------- wire format
// Records the child writes: a type byte, a u32 length, the payload.
enum Record : unsigned char { kStage = 'S', kLog = 'L', kFailure = 'F', kTable = 'T' };
constexpr size_t kMaxLogMessage = 1024;  // keeps a log record below PIPE_BUF: one atomic write
constexpr size_t kMaxReply = 1 << 20;    // what the parent keeps of a chatty child

void put_u32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
void put_str(std::string& out, const std::string& s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool u8(unsigned char& v) {
    if (pos_ + 1 > data_.size()) return false;
    v = static_cast<unsigned char>(data_[pos_++]);
    return true;
  }
  bool u32(uint32_t& v) {
    if (pos_ + sizeof(v) > data_.size()) return false;
    std::memcpy(&v, data_.data() + pos_, sizeof(v));
    pos_ += sizeof(v);
    return true;
  }
  bool str(std::string& s) {
    uint32_t n = 0;
    if (!u32(n) || n > data_.size() - pos_) return false;
    s.assign(data_, pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ >= data_.size(); }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

std::string encode_table(const TableFacts& t) {
  std::string out;
  put_u32(out, t.abi_major);
  put_u32(out, t.abi_minor);
  put_u32(out, t.struct_size);
  put_str(out, t.name);
  put_str(out, t.version);
  put_str(out, t.description);
  put_u32(out, t.modalities);
  put_u32(out, t.devices);
  put_u32(out, static_cast<uint32_t>(t.null_functions.size()));
  for (const auto& f : t.null_functions) put_str(out, f);
  put_str(out, t.unreadable);
  return out;
}

bool decode_table(const std::string& payload, TableFacts& t) {
  Reader r(payload);
  uint32_t n = 0;
  if (!(r.u32(t.abi_major) && r.u32(t.abi_minor) && r.u32(t.struct_size) && r.str(t.name) &&
        r.str(t.version) && r.str(t.description) && r.u32(t.modalities) && r.u32(t.devices) &&
        r.u32(n) && n <= 64))
    return false;
  t.null_functions.resize(n);
  for (auto& f : t.null_functions)
    if (!r.str(f)) return false;
  return r.str(t.unreadable) && r.done();
}

// ---------------------------------------------------------------- the child
int g_reply_fd = -1;  // set in the child only

void send(Record type, const std::string& payload) {
  std::string record(1, static_cast<char>(type));
  put_str(record, payload);
  const char* p = record.data();
  size_t n = record.size();
  while (n > 0) {
    const ssize_t w = ::write(g_reply_fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // the parent gave up on us
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void child_stage(ProbeStage stage) {
  send(kStage, std::string(1, static_cast<char>(stage)));
}

void child_log(void*, int32_t level, const char* plugin, const char* message) {
  std::string payload;
  put_u32(payload, static_cast<uint32_t>(level));
  put_str(payload, plugin ? std::string(plugin).substr(0, 64) : "plugin");
  put_str(payload, message ? std::string(message).substr(0, kMaxLogMessage) : "");
  send(kLog, payload);
}

// The host services the plugin sees in the probe: logging travels to the parent.
const eg_host_api kProbeHost = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ EG_ABI_VERSION_MINOR,
    /* .struct_size = */ sizeof(eg_host_api),
    /* .reserved = */ 0,
    /* .host_context = */ nullptr,
    /* .log = */ child_log,
    /* .item_desc_size = */ sizeof(eg_item_desc),
    /* .item_spec_size = */ sizeof(eg_item_spec),
    // No options in the probe: reading the parent's would take a lock another
    // of its threads may have held at the fork. The probe makes no instance.
    /* .tuning_option = */ [](void*, const char*) -> const char* { return nullptr; },
};

// Runs in the forked child. It touches nothing of the parent's state beyond
// what fork copied: no logging, no locks the parent may have held, no exit
// handlers (_exit), no core file, and the parent's signal handlers (which may
// clean up the parent's files) replaced by the defaults.
[[noreturn]] void run_child(const fs::path& file, int reply_fd, int null_fd) {
  g_reply_fd = reply_fd;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS, SIGINT, SIGTERM,
                  SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    ::sigaction(sig, &dfl, nullptr);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);  // stdout may be the user's data

  const EnteredPlugin p = enter_plugin(file, &kProbeHost, child_stage);
  if (!p.problem.empty()) {
    send(kFailure, p.problem);
    ::_exit(0);
  }
  child_stage(ProbeStage::table);
  send(kTable, encode_table(read_table(p.api, child_stage)));
  ::_exit(0);
}

// ---------------------------------------------------------------- the parent
std::string signal_name(int sig) {
  switch (sig) {
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal " + std::to_string(sig);
  }
}

// What was running when the child died, as a sentence subject.
std::string stage_subject(ProbeStage stage) {
  switch (stage) {
    case ProbeStage::start:
    case ProbeStage::dlopen:
      return "loading it (dlopen: its constructors, or the dynamic loader on a damaged file)";
    case ProbeStage::entry: return "its entry function (" EG_PLUGIN_ENTRY_SYMBOL ")";
    case ProbeStage::table: return "reading the table its entry function returned";
    case ProbeStage::strings: return "reading the strings its table points to";
  }
  return "loading it";
}

std::string stage_cause(ProbeStage stage) {
  switch (stage) {
    case ProbeStage::table:
      return "the entry returned a pointer that is not a valid plugin table, or a string in "
             "the table points nowhere";
    case ProbeStage::strings:
      return "the table's name, version or description is a pointer to no string";
    case ProbeStage::entry: return "the entry function crashed";
    default: return "a constructor crashed, or the file is damaged";
  }
}

std::string seconds(std::chrono::milliseconds t) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(t.count()) / 1000.0);
  return buf;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

// ---------------------------------------------------------------- shared

EnteredPlugin enter_plugin(const fs::path& file, const eg_host_api* host,
                           void (*on_stage)(ProbeStage)) {
  EnteredPlugin out;
  auto fail = [&](std::string problem) {
    if (out.handle) ::dlclose(out.handle);
    out.handle = nullptr;
    out.api = nullptr;
    out.problem = std::move(problem);
    return out;
  };
  if (on_stage) on_stage(ProbeStage::dlopen);
  choose_blas_kernels();  // before a plugin brings OpenBLAS in (blas_kernels.hpp)
  out.handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!out.handle) {
    const char* why = ::dlerror();
    return fail(std::string("could not be loaded: ") + (why ? why : "dlopen failed"));
  }
  using Entry = const eg_plugin_api* (*)(const eg_host_api*);
  void* symbol = ::dlsym(out.handle, EG_PLUGIN_ENTRY_SYMBOL);
  if (!symbol)
    return fail(std::string("does not export the entry symbol '") + EG_PLUGIN_ENTRY_SYMBOL +
                "' (build it with encgraph_add_plugin, see docs/writing-a-plugin.md)");
  if (on_stage) on_stage(ProbeStage::entry);
  try {
    out.api = reinterpret_cast<Entry>(symbol)(host);
  } catch (...) {
    return fail(
        "its entry function threw an exception (an ABI violation: no exception may cross the C "
        "boundary)");
  }
  if (!out.api)
    return fail(
        "its entry function returned no table (the plugin declined this runtime; its log says "
        "why)");
  return out;
}

TableFacts read_table(const eg_plugin_api* api, void (*on_stage)(ProbeStage)) {
  TableFacts t;
  t.abi_major = api->abi_major;
  t.abi_minor = api->abi_minor;
  t.struct_size = api->struct_size;
  if (t.struct_size < EG_PLUGIN_API_V1_0_SIZE || t.struct_size > kMaxTableSize) return t;
  // Every byte the table claims, so a size past the end of its mapping faults here.
  const auto* bytes = reinterpret_cast<const volatile unsigned char*>(api);
  unsigned char sum = 0;
  for (uint32_t k = 0; k < t.struct_size; ++k) sum = static_cast<unsigned char>(sum ^ bytes[k]);
  (void)sum;
  if (on_stage) on_stage(ProbeStage::strings);
  auto text = [&](const char* field, const char* s, std::string& out) {
    if (!s) return;
    const size_t n = ::strnlen(s, kMaxTableString + 1);
    if (n > kMaxTableString && t.unreadable.empty()) t.unreadable = field;
    out.assign(s, std::min(n, kMaxTableString));
  };
  text("name", api->name, t.name);
  text("version", api->version, t.version);
  text("description", api->description, t.description);
  t.modalities = api->modalities;
  t.devices = api->devices;
  const std::pair<const char*, bool> required[] = {
      {"create", api->create != nullptr},
      {"destroy", api->destroy != nullptr},
      {"model_info", api->model_info != nullptr},
      {"budget_range", api->budget_range != nullptr},
      {"item_create", api->item_create != nullptr},
      {"item_destroy", api->item_destroy != nullptr},
      {"item_spec", api->item_spec != nullptr},
      {"buffer_shape", api->buffer_shape != nullptr},
      {"output_shape", api->output_shape != nullptr},
      {"workspace_size", api->workspace_size != nullptr},
      // 1.1: host-staged capture inputs replace it (a field past struct_size
      // is never read: a 1.0 table may end right before it).
      {"prepare_capture_inputs",
       api->prepare_capture_inputs != nullptr ||
           (EG_HAS_FIELD(t.struct_size, eg_plugin_api, prepare_capture_staging) &&
            api->prepare_capture_staging != nullptr)},
      {"prepare_replay_buffers", api->prepare_replay_buffers != nullptr},
      {"forward", api->forward != nullptr},
  };
  for (const auto& [fn, present] : required)
    if (!present) t.null_functions.emplace_back(fn);
  return t;
}

bool probe_enabled() {
  const char* v = std::getenv("ENCGRAPH_PLUGIN_PROBE");
  if (!v || std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  throw Error(ErrorKind::Config, std::string("ENCGRAPH_PLUGIN_PROBE='") + v +
                                     "': use 1 (probe each plugin in a child process first, "
                                     "the default) or 0 (load it directly)");
}

std::chrono::milliseconds probe_timeout() {
  const char* v = std::getenv("ENCGRAPH_PLUGIN_PROBE_TIMEOUT");
  if (!v) return std::chrono::milliseconds(10000);
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(s > 0.0) || s > 3600.0)
    throw Error(ErrorKind::Config, std::string("ENCGRAPH_PLUGIN_PROBE_TIMEOUT='") + v +
                                       "': use a number of seconds above 0 and at most 3600");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0 + 0.5));
}

ProbeResult probe_plugin(const fs::path& file, std::chrono::milliseconds timeout) {
  ProbeResult result;
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.problem = std::string("could not start the probe process (pipe: ") +
                     std::strerror(errno) + "); ENCGRAPH_PLUGIN_PROBE=0 loads without it";
    return result;
  }
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  // Buffered output would otherwise be written twice, once by each process.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    run_child(file, fds[1], null_fd);
  }
  close_fd(fds[1]);
  close_fd(null_fd);
  if (pid < 0) {
    close_fd(fds[0]);
    result.problem = std::string("could not start the probe process (fork: ") +
                     std::strerror(errno) + "); ENCGRAPH_PLUGIN_PROBE=0 loads without it";
    return result;
  }

  // Read until the child has exited and closed the pipe, or the deadline.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string reply;
  bool eof = false, exited = false, timed_out = false;
  int status = 0;
  while (!(eof && exited)) {
    if (!eof) {
      pollfd p{fds[0], POLLIN, 0};
      const int ready = ::poll(&p, 1, exited ? 0 : 20);
      if (ready > 0) {
        char buf[4096];
        const ssize_t n = ::read(fds[0], buf, sizeof(buf));
        if (n > 0 && reply.size() < kMaxReply) reply.append(buf, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) eof = true;
      } else if (exited) {
        eof = true;  // exited, nothing left: a grandchild may hold the pipe open
      }
    } else {
      ::usleep(1000);
    }
    if (!exited) {
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) exited = true;
    }
    if (!(eof && exited) && std::chrono::steady_clock::now() >= deadline) {
      if (!exited) {
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        timed_out = true;
      }
      break;
    }
  }
  close_fd(fds[0]);

  ProbeStage stage = ProbeStage::start;
  std::string failure;
  bool have_table = false;
  Reader r(reply);
  unsigned char type = 0;
  std::string payload;
  while (r.u8(type) && r.str(payload)) {
    if (type == kStage && payload.size() == 1 && static_cast<unsigned char>(payload[0]) <= 4) {
      stage = static_cast<ProbeStage>(payload[0]);
    } else if (type == kLog) {
      Reader lr(payload);
      ProbeLog log;
      uint32_t level = 0;
      if (lr.u32(level) && lr.str(log.plugin) && lr.str(log.message)) {
        log.level = static_cast<int32_t>(level);
        result.logs.push_back(std::move(log));
      }
    } else if (type == kFailure) {
      failure = payload;
    } else if (type == kTable) {
      have_table = decode_table(payload, result.table);
    }
  }

  if (timed_out) {
    result.problem = stage_subject(stage) + " did not finish within " + seconds(timeout) +
                     " s in the probe process, which was killed (it hangs?); if the plugin is "
                     "only slow to load, raise ENCGRAPH_PLUGIN_PROBE_TIMEOUT (seconds)";
  } else if (exited && WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    result.problem = stage_subject(stage) + " killed the probe process with " + signal_name(sig) +
                     " (" + stage_cause(stage) + "); fix the plugin or remove the file";
  } else if (!failure.empty()) {
    result.problem = failure;
  } else if (exited && WIFEXITED(status) && WEXITSTATUS(status) == 0 && have_table) {
    result.ok = true;
  } else if (exited && WIFEXITED(status)) {
    result.problem = stage_subject(stage) + " ended the probe process with exit status " +
                     std::to_string(WEXITSTATUS(status)) +
                     " before it answered (a constructor or the entry function called exit()); "
                     "fix the plugin or remove the file";
  } else {
    result.problem = "the probe process gave no answer; ENCGRAPH_PLUGIN_PROBE=0 loads without it";
  }
  return result;
}

}  // namespace encgraph
