#include "communicator.hpp"

#include <encgraph/error.hpp>

#include <cstring>
#include <string>

namespace encgraph {
namespace {

class InProcessCommunicator final : public Communicator {
 public:
  explicit InProcessCommunicator(int size) : received_(static_cast<size_t>(size), 0) {}
  int size() const override { return static_cast<int>(received_.size()); }
  void gather(int root, const std::vector<GatherBuffers>& ranks, size_t bytes) override {
    if (ranks.size() != received_.size() || root < 0 || root >= size())
      throw Error(ErrorKind::Internal, "gather to rank " + std::to_string(root) + " with " +
                                           std::to_string(ranks.size()) +
                                           " ranks' buffers on a communicator of " +
                                           std::to_string(size()));
    if (bytes == 0) return;
    char* recv = static_cast<char*>(ranks[static_cast<size_t>(root)].recv);
    for (size_t r = 0; r < ranks.size(); ++r) std::memcpy(recv + r * bytes, ranks[r].send, bytes);
    received_[static_cast<size_t>(root)] += static_cast<int64_t>(bytes * ranks.size());
  }
  int64_t bytes_received(int rank) const override {
    return received_.at(static_cast<size_t>(rank));
  }

 private:
  std::vector<int64_t> received_;
};

}  // namespace

std::unique_ptr<Communicator> make_in_process_communicator(int size) {
  if (size <= 0) throw_config("data parallel needs at least one rank");
  return std::make_unique<InProcessCommunicator>(size);
}

}  // namespace encgraph
