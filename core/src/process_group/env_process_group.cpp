#include "env_process_group.hpp"

#include "id_file.hpp"
#include "nccl_group.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace encgraph {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class EnvProcessGroup final : public ProcessGroup {
 public:
  EnvProcessGroup(const DistributedConfig& config, int rank, int size, int local_rank)
      : config_(config),
        rank_(rank),
        size_(size),
        local_rank_(local_rank),
        device_(local_rank),
        started_(now_seconds()) {}

  ~EnvProcessGroup() override { finish(0); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string launcher() const override { return "environment"; }
  double timeout_s() const override { return config_.timeout_s; }
  void set_device(int cuda_index) override {
    if (!control_) device_ = cuda_index;
  }

  std::vector<std::string> exchange(const std::string& mine_in, const std::string& what) override {
    join();
    check_failures();
    // Fixed-size blocks: a length, then the message.
    const std::string mine = mine_in.substr(0, kMaxControlBytes);
    std::vector<char> block(8 + kMaxControlBytes, 0);
    const uint64_t n = mine.size();
    std::memcpy(block.data(), &n, 8);
    std::memcpy(block.data() + 8, mine.data(), mine.size());
    const std::vector<char> all = control_->allgather_host(block.data(), block.size(), what);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) {
      const char* b = all.data() + static_cast<size_t>(r) * block.size();
      uint64_t len = 0;
      std::memcpy(&len, b, 8);
      out.emplace_back(b + 8, static_cast<size_t>(std::min<uint64_t>(len, kMaxControlBytes)));
    }
    return out;
  }

  bool has_host_gather() const override { return false; }
  void gather_host(const void*, void*, const std::vector<size_t>&, int,
                   const std::string&) override {
    throw_config(
        "CPU ranks started from RANK/WORLD_SIZE cannot exchange rows: an environment launch "
        "moves data with NCCL between CUDA devices. Start CPU ranks with mpirun, or use CUDA "
        "devices (runtime.device)");
  }

  void announce_failure(ErrorKind kind, const std::string& message) noexcept override {
    if (config_.id_file.empty()) return;
    try {
      // Written whole, then renamed into place: a reader polling over a
      // network filesystem never sees half a notice.
      const std::string final_name = failure_file(rank_);
      const std::string temp = final_name + ".tmp";
      {
        std::ofstream out(temp, std::ios::trunc);
        out << tag() << "\n" << encode_failure(kind, message.substr(0, 4000));
      }
      std::rename(temp.c_str(), final_name.c_str());
    } catch (...) {
    }
  }

  void check_failures() override {
    if (config_.id_file.empty()) return;
    // A stat per rank, at most every 100 ms: polled inside NCCL waits.
    const double now = now_seconds();
    if (now - last_check_ < 0.1) return;
    last_check_ = now;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      check_early_failure(r);  // failed before it joined
      std::ifstream in(failure_file(r));
      if (!in) continue;
      std::string first;
      std::getline(in, first);
      if (first != tag()) continue;  // an earlier job's
      std::stringstream rest;
      rest << in.rdbuf();
      throw decode_failure(r, rest.str());
    }
  }

  [[noreturn]] void abort_job(int exit_code) noexcept override {
    // No launcher to stop the others: they see the failure file or time out.
    // The id file must not outlive the job (a rerun could read a dead id).
    if (rank_ == 0 && !id_.empty()) remove_id_file(config_.id_file, id_);
    _exit(exit_code);
  }

  std::string share_nccl_id(const std::function<std::string()>& make,
                            const std::string& what) override {
    join();
    const std::string id = rank_ == 0 ? make() : std::string();
    return exchange(id, what).front();
  }

  void finish(int /*exit_code*/) noexcept override {
    if (finished_) return;
    finished_ = true;
    control_.reset();
    if (rank_ == 0 && !id_.empty()) remove_id_file(config_.id_file, id_);
  }

 private:
  // The control communicator, made at the first message: rank 0 publishes a
  // fresh id in the id file, the others wait for it.
  void join() {
    if (control_) return;
    if (config_.id_file.empty())
      throw_config(
          "a job started from RANK/WORLD_SIZE needs distributed.id_file: a "
          "file on a filesystem every rank sees, where rank 0 leaves its NCCL id");
    if (rank_ == 0) {
      id_ = NcclGroup::unique_id();
      publish_id_file(config_.id_file, config_.job_id, size_, id_);
    } else {
      // Without a job id, a file written well before this process started is stale.
      id_ = wait_id_file(config_.id_file, config_.job_id, size_, config_.timeout_s, rank_,
                         started_ - 60.0, [this] { check_early_failure(0); });
    }
    control_ = std::make_unique<NcclGroup>(id_, rank_, size_, device_, config_.timeout_s, this,
                                           "joining the job");
  }

  // Rank r's failure before it joined (its notice's tag has no id yet),
  // written since this process started: thrown.
  void check_early_failure(int r) const {
    struct stat st {};
    if (::stat(failure_file(r).c_str(), &st) != 0 ||
        static_cast<double>(st.st_mtime) < started_ - 60.0)
      return;
    std::ifstream in(failure_file(r));
    std::string first;
    std::getline(in, first);
    if (first != early_tag()) return;
    std::stringstream rest;
    rest << in.rdbuf();
    throw decode_failure(r, rest.str());
  }

  std::string early_tag() const { return "job " + config_.job_id + " id -"; }

  std::string failure_file(int r) const {
    return config_.id_file + ".rank" + std::to_string(r) + ".failed";
  }
  // Ties a failure file to this job's id.
  std::string tag() const {
    if (id_.empty()) return early_tag();
    static const char* digits = "0123456789abcdef";
    std::string t = "job " + config_.job_id + " id ";
    for (size_t i = 0; i < std::min<size_t>(id_.size(), 16); ++i) {
      t += digits[static_cast<unsigned char>(id_[i]) >> 4];
      t += digits[static_cast<unsigned char>(id_[i]) & 15];
    }
    return t;
  }

  DistributedConfig config_;
  int rank_, size_, local_rank_, device_;
  double started_;
  double last_check_ = 0.0;
  std::string id_;
  std::unique_ptr<NcclGroup> control_;
  bool finished_ = false;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_env_process_group(const DistributedConfig& config, int rank,
                                                     int size, int local_rank) {
  return std::make_shared<EnvProcessGroup>(config, rank, size, local_rank);
}

}  // namespace encgraph
