// Writes each item's embeddings as one safetensors tensor named by its id,
// [rows, hidden] in the plugin's output dtype, from the results of a run.
#pragma once

#include "config.hpp"
#include "executor.hpp"
#include "safetensors.hpp"

#include <encgraph/runtime.hpp>

#include <string>

namespace encgraph::host {

class EmbeddingSink {
 public:
  EmbeddingSink(const std::string& path, const Runtime& runtime, const HostConfig& config);
  // The consumer to hand to execute_workload.
  ResultConsumer consumer();
  // Writes the file; returns the number of tensors.
  size_t finish();
  int64_t rows() const { return rows_; }

 private:
  SafetensorsWriter writer_;
  int64_t rows_ = 0;
};

}  // namespace encgraph::host
