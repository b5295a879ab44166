// What encode() returns: one ItemResult per item, holding each named output
// of the plugin as an OutputTensor. Both are views of the call's
// encgraph::Result (shared, so any of them, or a DLPack capsule made from
// one, keeps the memory alive after the Runtime is gone).
#pragma once

#include <encgraph/result.hpp>

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

namespace encgraph::python {

// numpy's name of an ABI dtype ("float32", "bfloat16", ...; "unknown").
const char* dtype_name(int32_t dtype);

// One encode() request's Result and the CUDA ordinal it lives on (a Result
// knows its device type only).
struct HeldResult {
  Result result;
  int32_t device_id = 0;
};
using SharedResult = std::shared_ptr<const HeldResult>;

// Item `item`'s rows of output `output`: [rows, width].
class OutputTensor {
 public:
  OutputTensor(SharedResult result, size_t item, size_t output)
      : result_(std::move(result)), item_(item), output_(output) {}

  std::string name() const { return result_->result.output(output_).name; }
  pybind11::tuple shape() const;
  std::string dtype() const;   // "float32", "bfloat16", ...
  std::string device() const;  // "cpu" or "cuda:N"
  uintptr_t data_ptr() const;  // address of the first element
  int64_t nbytes() const;

  // The DLPack protocol: a capsule sharing the result's memory.
  pybind11::capsule dlpack(const pybind11::object& stream, const pybind11::object& max_version,
                           const pybind11::object& dl_device, const pybind11::object& copy) const;
  pybind11::tuple dlpack_device() const;

  // A host copy as a numpy array (bfloat16 widened to float32: numpy has no bfloat16).
  pybind11::object numpy() const;
  std::string repr() const;

 private:
  std::string device_name_text() const;

  SharedResult result_;
  size_t item_;
  size_t output_;
};

class ItemResult {
 public:
  ItemResult(SharedResult result, size_t item) : result_(std::move(result)), item_(item) {}
  size_t num_outputs() const { return result_->result.num_outputs(); }
  pybind11::list keys() const;
  OutputTensor get(const pybind11::object& key) const;  // a name or an index
  bool contains(const std::string& name) const {
    return result_->result.find_output(name).has_value();
  }
  OutputTensor primary() const { return OutputTensor(result_, item_, 0); }
  int64_t tokens() const { return result_->result.rows(item_, 0); }
  std::string repr() const;

 private:
  SharedResult result_;
  size_t item_;
};

// out="numpy": item i's outputs copied, {name: array}.
pybind11::dict numpy_outputs(const Result& result, size_t item,
                             const std::vector<std::vector<uint8_t>>& host_outputs);

}  // namespace encgraph::python
