// One call's outputs: a single allocation on the runtime's device holding, for
// each named output, every item's rows; item(i, o) is a view of item i (the
// caller's order) in output o, valid while the Result lives.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/output_spec.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace encgraph {

class DeviceBackend;
class StreamMark;

class Result {
 public:
  Result() = default;
  // Allocates (stream-ordered, on `backend`) room for every output's rows:
  // rows[o][i] rows of item i in output o, starting at row offsets[o][i] of
  // output o's region. The contents are unset until the runtime writes them.
  Result(std::shared_ptr<DeviceBackend> backend, std::vector<OutputSpec> outputs,
         std::vector<std::vector<int64_t>> rows, std::vector<std::vector<int64_t>> offsets);
  Result(Result&&) noexcept;
  Result& operator=(Result&&) noexcept;
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  ~Result();

  size_t size() const { return rows_.empty() ? 0 : rows_[0].size(); }
  size_t num_outputs() const { return outputs_.size(); }
  const OutputSpec& output(size_t o) const { return outputs_.at(o); }
  const std::vector<OutputSpec>& outputs() const { return outputs_; }
  std::optional<size_t> find_output(const std::string& name) const;

  eg_tensor item(size_t i, size_t o = 0) const;
  int64_t rows(size_t i, size_t o = 0) const { return rows_.at(o).at(i); }
  int64_t row_offset(size_t i, size_t o = 0) const { return offsets_.at(o).at(i); }
  int64_t hidden_size(size_t o = 0) const { return outputs_.at(o).width; }
  int32_t dtype(size_t o = 0) const { return outputs_.at(o).dtype; }
  int32_t device() const { return device_; }
  int64_t total_rows(size_t o = 0) const { return total_rows_.at(o); }
  // Start of output o's region (device memory), rows of hidden_size(o) elements.
  void* output_data(size_t o) const;
  // Output o's rows, copied to host memory; item i's start at host_offset(i, o).
  std::vector<uint8_t> to_host(size_t o = 0) const;
  // Enqueues a copy of item i's rows of output o (rows(i, o) x hidden_size(o)
  // elements) to host memory at `dst`; read it after wait(). Lets a caller copy
  // each item straight into its own buffer, once.
  void copy_item_to_host(size_t i, size_t o, void* dst) const;
  size_t host_offset(size_t i, size_t o = 0) const;
  // Waits until the device has written every row and the copies queued by
  // copy_item_to_host have landed (for timing; reads synchronise). Once the
  // runtime has marked the call (mark_written), neither waits for calls
  // queued after this one: their work runs on while these rows travel.
  void wait() const;
  // The runtime, once every write of this call is queued on the device.
  void mark_written();
  // Item i's rows of output o as float on the host (converts bf16/f16/f64).
  std::vector<float> item_as_float(size_t i, size_t o = 0) const;
  // The capture-axis keys item i's batch ran under (empty without axes).
  const std::vector<int64_t>& axis_keys(size_t i) const;
  void set_axis_keys(size_t i, const std::vector<int64_t>& keys);

 private:
  // Device to host: behind the written mark when there is one.
  void copy_to_host(void* dst, const void* src, size_t bytes) const;

  std::vector<OutputSpec> outputs_;
  std::vector<std::vector<int64_t>> rows_;       // [output][item]
  std::vector<std::vector<int64_t>> offsets_;    // [output][item], in rows
  std::vector<int64_t> total_rows_;              // [output]
  std::vector<size_t> region_;                   // [output] byte offset of its region
  std::vector<std::vector<int64_t>> axis_keys_;  // [item]; empty until set
  std::shared_ptr<void> memory_;                 // frees through the owning backend
  int32_t device_ = EG_DEVICE_CPU;
  std::shared_ptr<DeviceBackend> backend_;
  std::shared_ptr<StreamMark> written_;  // mark_written's; null: copies queue on the stream
};

}  // namespace encgraph
