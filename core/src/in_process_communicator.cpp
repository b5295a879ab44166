#include "communicator.hpp"

#include <encgraph/error.hpp>

#include <condition_variable>
#include <cstring>
#include <mutex>

namespace encgraph {
namespace {

// A reusable barrier; std::barrier would do but needs no completion step here.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(m_);
    const unsigned long gen = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != generation_; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_;
  int waiting_ = 0;
  unsigned long generation_ = 0;
};

class InProcessCommunicator final : public Communicator {
 public:
  explicit InProcessCommunicator(int size) : size_(size), barrier_(size), posted_(size) {}
  int size() const override { return size_; }
  void all_gather(int rank, const void* send, void* recv, size_t bytes, void*) override {
    posted_.at(rank) = send;
    barrier_.arrive_and_wait();  // every rank's block is posted
    for (int r = 0; r < size_; ++r)
      if (bytes) std::memcpy(static_cast<char*>(recv) + r * bytes, posted_[r], bytes);
    barrier_.arrive_and_wait();  // nobody reuses its block before all have read it
  }

 private:
  int size_;
  Barrier barrier_;
  std::vector<const void*> posted_;
};

}  // namespace

std::unique_ptr<Communicator> make_in_process_communicator(int size) {
  if (size <= 0) throw_config("data parallel needs at least one rank");
  return std::make_unique<InProcessCommunicator>(size);
}

}  // namespace encgraph
