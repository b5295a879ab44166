// The process group of an `mpirun` launch: its own shared library
// (libencgraph_mpi.so), opened by the core only when a process finds itself
// under mpirun, so that neither the core nor the host needs libmpi to start.
//
// Every wait is a nonblocking MPI call polled against a deadline: control
// messages go point to point (each rank to rank 0, then rank 0's combined
// answer back), so a root that times out knows which ranks are missing. A
// failing rank sends a notice on its own tag to every other rank; each rank
// keeps a receive for it posted and tests it in every wait.
#include "poll_deadline.hpp"

#include <encgraph/process_group.hpp>

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

namespace encgraph {
namespace {

constexpr int kTagControl = 101;
constexpr int kTagAnswer = 102;
constexpr int kTagFailure = 103;
constexpr size_t kNoticeBytes = 4096;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

#define EG_MPI_CHECK(expr)                                                                        \
  do {                                                                                            \
    const int eg_mpi_status_ = (expr);                                                            \
    if (eg_mpi_status_ != MPI_SUCCESS)                                                            \
      throw Error(ErrorKind::Device, "MPI error: " + mpi_error(eg_mpi_status_) + " in " + #expr + \
                                         " at " + __FILE__ + ":" + std::to_string(__LINE__));     \
  } while (0)

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > INT_MAX) return fallback;
  return static_cast<int>(n);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(const DistributedConfig& config) : timeout_s_(config.timeout_s) {
    int initialized = 0;
    EG_MPI_CHECK(MPI_Initialized(&initialized));
    if (!initialized) {
      int provided = 0;
      EG_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    }
    // Errors come back as codes (and become exceptions) instead of aborting.
    EG_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    EG_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    EG_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    local_rank_ = env_int("OMPI_COMM_WORLD_LOCAL_RANK", rank_);
    notice_.resize(kNoticeBytes);
    post_notice_receive();
  }

  ~MpiProcessGroup() override { finish(0); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string launcher() const override { return "mpirun"; }
  double timeout_s() const override { return timeout_s_; }

  std::vector<std::string> exchange(const std::string& mine_in, const std::string& what) override {
    control_mine_ = mine_in.substr(0, kMaxControlBytes);  // the group's: a send may outlive a throw
    const std::string& mine = control_mine_;
    std::vector<std::string> all(static_cast<size_t>(size_));
    if (rank_ == 0) {
      // One receive per other rank, then one combined answer to each. The
      // buffers are the group's: a wait that throws (a failure notice) leaves
      // receives posted, which may still be written into later.
      std::vector<std::vector<char>>& in = control_in_;
      in.assign(static_cast<size_t>(size_), std::vector<char>(kMaxControlBytes));
      std::vector<MPI_Request> reqs(static_cast<size_t>(size_), MPI_REQUEST_NULL);
      for (int r = 1; r < size_; ++r)
        EG_MPI_CHECK(MPI_Irecv(in[static_cast<size_t>(r)].data(),
                               static_cast<int>(kMaxControlBytes), MPI_BYTE, r, kTagControl,
                               MPI_COMM_WORLD, &reqs[static_cast<size_t>(r)]));
      std::vector<MPI_Status> st(static_cast<size_t>(size_));
      wait_all(reqs, st, what, /*from=*/true);
      all[0] = mine;
      for (int r = 1; r < size_; ++r) {
        int count = 0;
        EG_MPI_CHECK(MPI_Get_count(&st[static_cast<size_t>(r)], MPI_BYTE, &count));
        all[static_cast<size_t>(r)].assign(in[static_cast<size_t>(r)].data(),
                                           static_cast<size_t>(count));
      }
      control_out_ = pack(all);
      const std::vector<char>& answer = control_out_;
      std::vector<MPI_Request> sends(static_cast<size_t>(size_), MPI_REQUEST_NULL);
      for (int r = 1; r < size_; ++r)
        EG_MPI_CHECK(MPI_Isend(answer.data(), static_cast<int>(answer.size()), MPI_BYTE, r,
                               kTagAnswer, MPI_COMM_WORLD, &sends[static_cast<size_t>(r)]));
      wait_all(sends, st, what, /*from=*/false);
      return all;
    }
    MPI_Request send = MPI_REQUEST_NULL;
    EG_MPI_CHECK(MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, 0, kTagControl,
                           MPI_COMM_WORLD, &send));
    std::vector<char>& answer = control_answer_;  // the group's, as above
    answer.assign(static_cast<size_t>(size_) * (kMaxControlBytes + 8), 0);
    MPI_Request recv = MPI_REQUEST_NULL;
    EG_MPI_CHECK(MPI_Irecv(answer.data(), static_cast<int>(answer.size()), MPI_BYTE, 0, kTagAnswer,
                           MPI_COMM_WORLD, &recv));
    std::vector<MPI_Request> reqs{send, recv};
    std::vector<MPI_Status> st(2);
    wait_all(reqs, st, what, /*from=*/true, /*peer=*/0);
    int count = 0;
    EG_MPI_CHECK(MPI_Get_count(&st[1], MPI_BYTE, &count));
    return unpack(answer.data(), static_cast<size_t>(count), what);
  }

  bool has_host_gather() const override { return true; }

  void gather_host(const void* send, void* recv, const std::vector<size_t>& bytes_per_rank,
                   int root, const std::string& what) override {
    if (static_cast<int>(bytes_per_rank.size()) != size_)
      throw Error(ErrorKind::Internal, "gather with " + std::to_string(bytes_per_rank.size()) +
                                           " sizes over " + std::to_string(size_) + " ranks");
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    size_t at = 0;
    for (int r = 0; r < size_; ++r) {
      const size_t b = bytes_per_rank[static_cast<size_t>(r)];
      if (b > static_cast<size_t>(INT_MAX) || at > static_cast<size_t>(INT_MAX))
        throw Error(ErrorKind::Config, what +
                                           ": a request's rows exceed 2 GiB per rank for MPI; "
                                           "lower workload.request_size");
      counts[static_cast<size_t>(r)] = static_cast<int>(b);
      displs[static_cast<size_t>(r)] = static_cast<int>(at);
      at += b;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    EG_MPI_CHECK(MPI_Igatherv(send, counts[static_cast<size_t>(rank_)], MPI_BYTE, recv,
                              counts.data(), displs.data(), MPI_BYTE, root, MPI_COMM_WORLD, &req));
    std::vector<MPI_Request> reqs{req};
    std::vector<MPI_Status> st(1);
    wait_all(reqs, st, what, /*from=*/rank_ == root, rank_ == root ? -1 : root);
  }

  void announce_failure(ErrorKind kind, const std::string& message) noexcept override {
    if (finished_) return;
    try {
      // The group's: a send still pending after the grace below reads it later.
      notice_out_ = encode_failure(kind, message).substr(0, kNoticeBytes);
      const std::string& text = notice_out_;
      std::vector<MPI_Request> sends;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        MPI_Request s = MPI_REQUEST_NULL;
        if (MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_BYTE, r, kTagFailure,
                      MPI_COMM_WORLD, &s) == MPI_SUCCESS)
          sends.push_back(s);
      }
      // Small messages leave at once; a peer that is gone must not hold us.
      const PollDeadline deadline(std::min(timeout_s_, 5.0));
      int done = 0;
      while (!done && !deadline.passed()) {
        if (MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE) !=
            MPI_SUCCESS)
          break;
        if (!done) deadline.pause();
      }
    } catch (...) {
    }
  }

  void check_failures() override {
    if (notice_req_ == MPI_REQUEST_NULL) return;
    int arrived = 0;
    MPI_Status st;
    EG_MPI_CHECK(MPI_Test(&notice_req_, &arrived, &st));
    if (!arrived) return;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    notice_req_ = MPI_REQUEST_NULL;
    throw decode_failure(st.MPI_SOURCE, std::string(notice_.data(), static_cast<size_t>(count)));
  }

  [[noreturn]] void abort_job(int exit_code) noexcept override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    _exit(exit_code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
  }

  std::string share_nccl_id(const std::function<std::string()>& make,
                            const std::string& what) override {
    const std::string id = rank_ == 0 ? make() : std::string();
    return exchange(id, what).front();
  }

  void finish(int exit_code) noexcept override {
    if (finished_) return;
    finished_ = true;
    if (notice_req_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&notice_req_);
      MPI_Request_free(&notice_req_);
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // MPI_Finalize waits for every rank (one still loading a model, or
    // writing the outputs, may take long); one stuck elsewhere must not keep
    // this process alive past the timeout. The watchdog stands down once it
    // returns (a program embedding encgraph goes on running).
    const double grace = timeout_s_;
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([grace, done, exit_code] {
      const PollDeadline deadline(grace);
      while (!done->load()) {
        if (deadline.passed()) _exit(exit_code);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }).detach();
    MPI_Finalize();
    done->store(true);
  }

 private:
  void post_notice_receive() {
    EG_MPI_CHECK(MPI_Irecv(notice_.data(), static_cast<int>(notice_.size()), MPI_BYTE,
                           MPI_ANY_SOURCE, kTagFailure, MPI_COMM_WORLD, &notice_req_));
  }

  // Polls `reqs` until all complete, a failure notice arrives (thrown), or
  // the timeout passes (thrown, naming the ranks whose transfers are pending:
  // reqs[r] is rank r's when `from`, else `peer`'s when peer >= 0).
  void wait_all(std::vector<MPI_Request>& reqs, std::vector<MPI_Status>& st,
                const std::string& what, bool from, int peer = -1) {
    const PollDeadline deadline(timeout_s_);
    for (;;) {
      int done = 0;
      EG_MPI_CHECK(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, st.data()));
      if (done) return;
      check_failures();
      if (deadline.passed()) {
        std::vector<int> missing;
        if (peer >= 0) {
          missing.push_back(peer);
        } else {
          for (size_t r = 0; r < reqs.size(); ++r)
            if (reqs[r] != MPI_REQUEST_NULL && (from || static_cast<int>(r) != rank_))
              missing.push_back(static_cast<int>(r));
        }
        throw GroupTimeout("rank " + std::to_string(rank_) + ": " +
                           (missing.size() == 1 ? "rank " : "ranks ") + rank_list(missing) +
                           " did not answer within " + format_seconds(timeout_s_) + " during " +
                           what +
                           " (distributed.timeout_s): it may have died, hung or be far slower; "
                           "raise the timeout for very large requests");
      }
      deadline.pause();
    }
  }

  static std::vector<char> pack(const std::vector<std::string>& all) {
    std::vector<char> out;
    for (const std::string& s : all) {
      const uint64_t n = s.size();
      out.insert(out.end(), reinterpret_cast<const char*>(&n),
                 reinterpret_cast<const char*>(&n) + sizeof n);
      out.insert(out.end(), s.begin(), s.end());
    }
    return out;
  }

  std::vector<std::string> unpack(const char* data, size_t bytes, const std::string& what) const {
    std::vector<std::string> all;
    size_t at = 0;
    while (at + sizeof(uint64_t) <= bytes && static_cast<int>(all.size()) < size_) {
      uint64_t n = 0;
      std::memcpy(&n, data + at, sizeof n);
      at += sizeof n;
      if (n > bytes - at) break;
      all.emplace_back(data + at, static_cast<size_t>(n));
      at += static_cast<size_t>(n);
    }
    if (static_cast<int>(all.size()) != size_ || at != bytes)
      throw Error(ErrorKind::Internal, "rank " + std::to_string(rank_) +
                                           ": a malformed answer from rank 0 during " + what);
    return all;
  }

  double timeout_s_;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  // Control message buffers, kept by the group: see exchange().
  std::vector<std::vector<char>> control_in_;
  std::vector<char> control_answer_, control_out_;
  std::string control_mine_, notice_out_;
  std::vector<char> notice_;
  MPI_Request notice_req_ = MPI_REQUEST_NULL;
  bool finished_ = false;
};

}  // namespace
}  // namespace encgraph

// The library's one entry point, found by dlsym.
extern "C" __attribute__((visibility("default"))) encgraph::ProcessGroup* encgraph_mpi_join(
    const encgraph::DistributedConfig* config) {
  return new encgraph::MpiProcessGroup(*config);
}
