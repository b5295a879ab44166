// Loading a plugin candidate in a child process first: a library whose
// constructor aborts, an entry that faults or hangs, or a table pointer that
// points nowhere then kills the child, and the caller gets a reason instead of
// a dead process. The child only dlopens the file, calls the entry, copies the
// table's facts into a pipe and _exit()s; the parent waits with a deadline.
#pragma once

#include <encgraph/plugin_api.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace encgraph {

// What the loader checks in a plugin table, copied out of it. The strings and
// functions are read only when struct_size says the ABI 1.0 fields exist.
struct TableFacts {
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  uint32_t struct_size = 0;
  std::string name;
  std::string version;
  std::string description;
  uint32_t modalities = 0;
  uint32_t devices = 0;
  std::vector<std::string> null_functions;  // required functions that are NULL
  std::string unreadable;                   // a string field that is too long to be one
};

// The library opened (dlopen RTLD_NOW | RTLD_LOCAL) and its entry called: the one
// place both the probe child and the in-process load do it, so both give the same
// reasons. On failure `problem` says why, and the library was closed again.
struct EnteredPlugin {
  void* handle = nullptr;
  const eg_plugin_api* api = nullptr;
  std::string problem;
};
enum class ProbeStage : unsigned char { start = 0, dlopen = 1, entry = 2, table = 3, strings = 4 };
EnteredPlugin enter_plugin(const std::filesystem::path& file, const eg_host_api* host,
                           void (*on_stage)(ProbeStage) = nullptr);

// Largest table (and string) the loader accepts: far above any ABI 1.x table, far
// below what a garbage size would make the probe read.
constexpr uint32_t kMaxTableSize = 64 * 1024;
constexpr size_t kMaxTableString = 4096;

// Copies the facts out of `api` (read in full up to struct_size, at most
// kMaxTableSize). A garbage pointer faults here: call it in-process only after a
// probe, or knowing the risk.
TableFacts read_table(const eg_plugin_api* api, void (*on_stage)(ProbeStage) = nullptr);

// Why a table's facts cannot serve this runtime, or "": every rule on a table,
// for tables read in the probe and in this process alike (plugin_loader.cpp).
std::string table_problem(const TableFacts& table);

// One message the plugin logged through the host services during the probe.
struct ProbeLog {
  int32_t level = 0;
  std::string plugin;
  std::string message;
};

struct ProbeResult {
  bool ok = false;      // the entry returned a table and `table` holds its facts
  std::string problem;  // why not (no file prefix), when !ok
  TableFacts table;
  std::vector<ProbeLog> logs;
};

// Whether candidates are probed (ENCGRAPH_PLUGIN_PROBE, "1" by default, "0" to
// load in-process directly) and for how long (ENCGRAPH_PLUGIN_PROBE_TIMEOUT,
// seconds, 10 by default: a CUDA plugin loads the CUDA libraries). A malformed value is a Config
// error naming it.
bool probe_enabled();
std::chrono::milliseconds probe_timeout();

// Loads `file` in a child process and reads its table there; never throws for
// anything the plugin does.
ProbeResult probe_plugin(const std::filesystem::path& file, std::chrono::milliseconds timeout);

}  // namespace encgraph
