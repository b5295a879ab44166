// The device of a rank (rank_device) and the refusals of prepare_rank_device
// that need no GPU (core/src/distributed_runtime.cpp).
#include "process_group/env_process_group.hpp"

#include <encgraph/distributed_runtime.hpp>
#include <encgraph/error.hpp>
#include <encgraph/process_group.hpp>

#include <doctest/doctest.h>

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace encgraph;
namespace fs = std::filesystem;

namespace {

// The Error `fn` throws: its kind and message (kind Internal and "" when none).
struct Thrown {
  ErrorKind kind = ErrorKind::Internal;
  std::string message;
};
template <class F>
Thrown thrown_by(F fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {};
}

std::string no_gpu(int local_rank, const std::string& device, int devices) {
  return "local rank " + std::to_string(local_rank) + " has no GPU: runtime.device = \"" + device +
         "\" gives each process of a host the CUDA device of its local rank, and this host has " +
         std::to_string(devices) + (devices == 1 ? " device" : " devices") +
         "; start at most that many processes per host, or set runtime.device = \"cpu\"";
}

const std::string kCpuRanksNeedMpirun =
    "CPU ranks started from RANK/WORLD_SIZE cannot exchange rows: an environment launch moves "
    "data with NCCL between CUDA devices. Start CPU ranks with mpirun, or use CUDA devices "
    "(runtime.device)";

// A group that records what prepare_rank_device asks of it and sends nothing.
class RecordingGroup final : public ProcessGroup {
 public:
  RecordingGroup(int local_rank, bool host_gather)
      : local_rank_(local_rank), host_gather_(host_gather) {}
  int rank() const override { return local_rank_; }
  int size() const override { return 8; }
  int local_rank() const override { return local_rank_; }
  std::string launcher() const override { return "test"; }
  double timeout_s() const override { return 1.0; }
  std::vector<std::string> exchange(const std::string&, const std::string& what) override {
    ++messages;
    throw Error(ErrorKind::Internal, "unexpected exchange: " + what);
  }
  bool has_host_gather() const override { return host_gather_; }
  void gather_host(const void* send, void* recv, const std::vector<size_t>& bytes, int root,
                   const std::string& what) override {
    ++gathers;
    gather_args_empty = send == nullptr && recv == nullptr && bytes.empty() && root == 0;
    gather_what = what;
    throw Error(ErrorKind::Config, "no host gather here");
  }
  void announce_failure(ErrorKind, const std::string&) noexcept override { ++messages; }
  void check_failures() override {}
  [[noreturn]] void abort_job(int code) noexcept override { std::_Exit(code); }
  std::string share_nccl_id(const std::function<std::string()>&, const std::string&) override {
    ++messages;
    return {};
  }
  void finish(int) noexcept override {}
  void set_device(int cuda_index) override { devices_set.push_back(cuda_index); }

  int messages = 0, gathers = 0;
  bool gather_args_empty = false;
  std::string gather_what;
  std::vector<int> devices_set;

 private:
  int local_rank_;
  bool host_gather_;
};

}  // namespace

TEST_CASE("rank_device: cuda:{local_rank}, cuda and auto give the local rank's GPU") {
  for (const std::string device : {"cuda:{local_rank}", "cuda", "auto", ""}) {
    CAPTURE(device);
    CHECK(rank_device(device, 0, 1) == "cuda:0");
    CHECK(rank_device(device, 0, 4) == "cuda:0");
    CHECK(rank_device(device, 3, 4) == "cuda:3");
    CHECK(rank_device(device, 1, 2) == "cuda:1");
  }
}

TEST_CASE("rank_device: a named device and cpu are taken as they are") {
  for (int devices : {0, 1, 8}) {
    CAPTURE(devices);
    CHECK(rank_device("cpu", 0, devices) == "cpu");
    CHECK(rank_device("cpu", 5, devices) == "cpu");
    CHECK(rank_device("cuda:2", 0, devices) == "cuda:2");
    CHECK(rank_device("cuda:0", 7, devices) == "cuda:0");
  }
}

TEST_CASE("rank_device: auto without a GPU is the CPU, whatever the local rank") {
  CHECK(rank_device("auto", 0, 0) == "cpu");
  CHECK(rank_device("auto", 5, 0) == "cpu");
  CHECK(rank_device("", 2, 0) == "cpu");
}

TEST_CASE("rank_device: a local rank beyond the GPUs seen is refused with the fix") {
  struct Case {
    std::string device;
    int local_rank, devices;
    std::string named;  // the setting the message quotes
  };
  const std::vector<Case> cases = {
      {"cuda:{local_rank}", 2, 2, "cuda:{local_rank}"},
      {"cuda:{local_rank}", 1, 1, "cuda:{local_rank}"},
      {"cuda:{local_rank}", 0, 0, "cuda:{local_rank}"},
      {"cuda", 4, 2, "cuda"},
      {"cuda", 0, 0, "cuda"},
      {"auto", 1, 1, "auto"},
      {"auto", 9, 8, "auto"},
      {"", 3, 2, "auto"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.device);
    CAPTURE(c.local_rank);
    CAPTURE(c.devices);
    const Thrown t = thrown_by([&] { rank_device(c.device, c.local_rank, c.devices); });
    CHECK(t.kind == ErrorKind::Config);
    CHECK(t.message == no_gpu(c.local_rank, c.named, c.devices));
  }
  // One device is a device, not "devices".
  CHECK(thrown_by([] { rank_device("cuda", 1, 1); }).message.find("this host has 1 device;") !=
        std::string::npos);
}

TEST_CASE("rank_device with the devices this process sees") {
  CHECK(rank_device("cpu", 0) == "cpu");
  CHECK(rank_device("cuda:1", 0) == "cuda:1");
  // No host has this many GPUs.
  const Thrown t = thrown_by([] { rank_device("cuda:{local_rank}", 100000); });
  CHECK(t.kind == ErrorKind::Config);
  CHECK(t.message.rfind("local rank 100000 has no GPU: runtime.device = \"cuda:{local_rank}\"",
                        0) == 0);
}

TEST_CASE(
    "prepare_rank_device: CPU ranks of an environment launch are refused before any "
    "message") {
  std::string tmpl = (fs::temp_directory_path() / "encgraph-rank-device-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  DistributedConfig config;
  config.id_file = (dir / "id").string();
  config.timeout_s = 0.5;
  for (int rank : {0, 1}) {
    CAPTURE(rank);
    auto group = make_env_process_group(config, rank, 2, rank);
    const Thrown t = thrown_by([&] { prepare_rank_device(*group, "cpu"); });
    CHECK(t.kind == ErrorKind::Config);
    CHECK(t.message == kCpuRanksNeedMpirun);
  }
  // No id file published, no failure notice written: nothing was sent.
  CHECK(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST_CASE("prepare_rank_device: a local rank without a GPU is refused") {
  DistributedConfig config;  // no id file: any message would be refused too
  auto group = make_env_process_group(config, 1, 2, 100000);
  for (const std::string device : {"cuda:{local_rank}", "cuda"}) {
    CAPTURE(device);
    const Thrown t = thrown_by([&] { prepare_rank_device(*group, device); });
    CHECK(t.kind == ErrorKind::Config);
    CHECK(t.message.rfind("local rank 100000 has no GPU: runtime.device = \"" + device + "\"", 0) ==
          0);
    CHECK(t.message.find("or set runtime.device = \"cpu\"") != std::string::npos);
  }
  // auto: the GPU of the local rank where the host has GPUs (none has this
  // many), else the CPU, which an environment launch cannot run.
  const Thrown t = thrown_by([&] { prepare_rank_device(*group, "auto"); });
  CHECK(t.kind == ErrorKind::Config);
  const bool cpu = thrown_by([] { rank_device("auto", 100000); }).message.empty();
  if (cpu)
    CHECK(t.message == kCpuRanksNeedMpirun);
  else
    CHECK(t.message.rfind("local rank 100000 has no GPU: runtime.device = \"auto\"", 0) == 0);
}

TEST_CASE("prepare_rank_device: what it asks of the group") {
  SUBCASE("CPU under a launcher with a host gather: nothing") {
    RecordingGroup g(0, true);
    CHECK_NOTHROW(prepare_rank_device(g, "cpu"));
    CHECK(g.gathers == 0);
    CHECK(g.messages == 0);
    CHECK(g.devices_set.empty());
  }
  SUBCASE("CPU without a host gather: the group's explanation, at start-up") {
    RecordingGroup g(0, false);
    const Thrown t = thrown_by([&] { prepare_rank_device(g, "cpu"); });
    CHECK(t.kind == ErrorKind::Config);
    CHECK(t.message == "no host gather here");
    CHECK(g.gathers == 1);
    CHECK(g.gather_args_empty);
    CHECK(g.gather_what == "start-up");
    CHECK(g.messages == 0);
  }
  SUBCASE("a named CUDA device is handed to the group") {
    RecordingGroup g(1, false);
    CHECK_NOTHROW(prepare_rank_device(g, "cuda:3"));
    CHECK(g.devices_set == std::vector<int>{3});
    CHECK(g.gathers == 0);
    CHECK(g.messages == 0);
  }
  SUBCASE("a local rank without a GPU: refused before the group is asked anything") {
    RecordingGroup g(100000, true);
    CHECK(thrown_by([&] { prepare_rank_device(g, "cuda:{local_rank}"); }).kind ==
          ErrorKind::Config);
    CHECK(g.devices_set.empty());
    CHECK(g.gathers == 0);
    CHECK(g.messages == 0);
  }
}

TEST_CASE("join_process_group: a job id that could never match the id file is refused at once") {
  std::string tmpl = (fs::temp_directory_path() / "encgraph-job-id-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  DistributedConfig config;
  config.launch = "env";
  config.id_file = (dir / "id").string();
  config.timeout_s = 30;  // a wait would show as a slow test, not a pass
  auto refused = [&](const std::string& why) {
    const auto start = std::chrono::steady_clock::now();
    const Thrown t = thrown_by([&] { join_process_group(config); });
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    CHECK(t.kind == ErrorKind::Config);
    CHECK(t.message.find(why) != std::string::npos);
    CHECK(t.message.find("must be at most 256 printable characters on one line: set "
                         "distributed.job_id") != std::string::npos);
  };
  config.job_id = "line\nbreak";
  refused("the job id 'line?break' (10 bytes;");
  config.job_id = std::string(300, 'j');
  refused("(300 bytes;");
  config.job_id.clear();  // from the scheduler's variable
  setenv("ENCGRAPH_JOB_ID", "tab\there", 1);
  refused("the job id 'tab?here'");
  unsetenv("ENCGRAPH_JOB_ID");
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  CHECK(fs::is_empty(dir));  // nothing published
  fs::remove_all(dir);
}
