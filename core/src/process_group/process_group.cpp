// Which launcher started this process, and joining its job: mpirun through
// libencgraph_mpi.so (opened only here), or the scheduler's variables.
#include "env_process_group.hpp"

#include <encgraph/process_group.hpp>

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <filesystem>

namespace encgraph {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// A non-negative integer variable; Config error naming it otherwise.
int env_int(const char* name) {
  const char* v = env(name);
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > INT_MAX)
    throw_config(std::string("the environment variable ") + name + "=\"" + v +
                 "\" is not a non-negative integer; the launcher must set it to the process's "
                 "rank or count");
  return static_cast<int>(n);
}

bool under_mpirun() {
  return env("OMPI_COMM_WORLD_SIZE") != nullptr;
}
bool under_env() {
  return env("RANK") != nullptr && env("WORLD_SIZE") != nullptr;
}

// libencgraph_mpi.so: beside this library first (the build tree, an install,
// a bundle), else wherever the loader finds it.
void* open_mpi_bridge() {
  Dl_info info{};
  std::string error;
  if (dladdr(reinterpret_cast<void*>(&join_process_group), &info) && info.dli_fname) {
    const auto beside = std::filesystem::path(info.dli_fname).parent_path() / "libencgraph_mpi.so";
    if (std::filesystem::exists(beside)) {
      if (void* h = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
      error = dlerror();
    }
  }
  if (void* h = dlopen("libencgraph_mpi.so", RTLD_NOW | RTLD_LOCAL)) return h;
  if (error.empty()) error = dlerror();
  throw Error(
      ErrorKind::Device,
      "this process runs under mpirun, but encgraph's MPI support cannot be loaded: " + error +
          ". Build encgraph with Open MPI installed (apt-get install libopenmpi-dev) and "
          "make libmpi.so.40 findable (LD_LIBRARY_PATH)");
}

// The id file holds the job id on one line and is read 4096 bytes at most:
// a line break or a long id would never match, and every rank would wait out
// its timeout instead of hearing why.
void check_job_id(const std::string& job_id) {
  bool printable = true;
  for (unsigned char ch : job_id) printable &= ch >= 0x20 && ch != 0x7f;
  if (job_id.size() <= 256 && printable) return;
  std::string shown;
  for (unsigned char ch : job_id.substr(0, 64)) shown += ch >= 0x20 && ch != 0x7f ? char(ch) : '?';
  throw_config("the job id '" + shown + (job_id.size() > 64 ? "...'" : "'") + " (" +
               std::to_string(job_id.size()) +
               " bytes; from distributed.job_id, else ENCGRAPH_JOB_ID, SLURM_JOB_ID or "
               "TORCHELASTIC_RUN_ID) must be at most 256 printable characters on one line: set "
               "distributed.job_id to a short name for this job");
}

}  // namespace

std::string detect_launch(const DistributedConfig& config) {
  const std::string& launch = config.launch;
  if (launch == "off") return "";
  if (launch == "mpi") {
    if (!under_mpirun())
      throw_config(
          "distributed.launch = \"mpi\", but this process was not started by "
          "Open MPI's mpirun (OMPI_COMM_WORLD_SIZE is unset): start it with "
          "`mpirun -np N encgraph ...`, or set launch = \"auto\"");
    return "mpirun";
  }
  if (launch == "env") {
    if (!under_env())
      throw_config(
          "distributed.launch = \"env\", but RANK and WORLD_SIZE are not both "
          "set: the launcher must set RANK, WORLD_SIZE and LOCAL_RANK for each process");
    return "environment";
  }
  if (launch != "auto")
    throw_config("distributed.launch = \"" + launch +
                 "\" is not one of \"auto\", \"mpi\", \"env\", \"off\"");
  if (under_mpirun()) return "mpirun";
  if (under_env()) return "environment";
  return "";
}

std::shared_ptr<ProcessGroup> join_process_group(const DistributedConfig& config) {
  if (!(config.timeout_s > 0.0))
    throw_config(
        "distributed.timeout_s must be positive (seconds any rank waits for "
        "another)");
  const std::string launch = detect_launch(config);
  if (launch.empty()) return nullptr;
  if (launch == "mpirun") {
    if (env_int("OMPI_COMM_WORLD_SIZE") <= 1) return nullptr;
    void* bridge = open_mpi_bridge();  // kept open for the life of the process
    using Join = ProcessGroup* (*)(const DistributedConfig*);
    auto join = reinterpret_cast<Join>(dlsym(bridge, "encgraph_mpi_join"));
    if (!join)
      throw Error(ErrorKind::Device,
                  "libencgraph_mpi.so lacks encgraph_mpi_join: it belongs to "
                  "another encgraph build; rebuild or reinstall encgraph");
    return std::shared_ptr<ProcessGroup>(join(&config));
  }
  const int size = env_int("WORLD_SIZE");
  const int rank = env_int("RANK");
  if (size < 1 || rank >= size)
    throw_config("RANK=" + std::to_string(rank) + " and WORLD_SIZE=" + std::to_string(size) +
                 " do not fit: RANK must be below WORLD_SIZE");
  if (size == 1) return nullptr;
  const int local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK") : rank;
  DistributedConfig c = config;
  if (c.job_id.empty())
    for (const char* name : {"ENCGRAPH_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
      if (const char* v = env(name)) {
        c.job_id = v;
        break;
      }
  check_job_id(c.job_id);
  return make_env_process_group(c, rank, size, local_rank);
}

}  // namespace encgraph
