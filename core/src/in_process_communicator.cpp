#include "communicator.hpp"

#include <encgraph/error.hpp>

#include <cstring>
#include <string>

namespace encgraph {
namespace {

class InProcessCommunicator final : public Communicator {
 public:
  explicit InProcessCommunicator(int size) : size_(size) {}
  int size() const override { return size_; }
  void all_gather(const std::vector<GatherBuffers>& ranks, size_t bytes) override {
    if (static_cast<int>(ranks.size()) != size_)
      throw Error(ErrorKind::Internal, "all_gather with " + std::to_string(ranks.size()) +
                                           " ranks' buffers on a communicator of " +
                                           std::to_string(size_));
    for (const GatherBuffers& to : ranks)
      for (int r = 0; r < size_; ++r)
        if (bytes) std::memcpy(static_cast<char*>(to.recv) + r * bytes, ranks[r].send, bytes);
  }

 private:
  int size_;
};

}  // namespace

std::unique_ptr<Communicator> make_in_process_communicator(int size) {
  if (size <= 0) throw_config("data parallel needs at least one rank");
  return std::make_unique<InProcessCommunicator>(size);
}

}  // namespace encgraph
