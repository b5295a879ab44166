// Writes each item's outputs as safetensors tensors from the results of a run:
// the first output named by the item's id, every other output o by
// "<id>/<o's name>", each [rows, width] in that output's dtype.
#pragma once

#include "config.hpp"
#include "executor.hpp"
#include "safetensors.hpp"

#include <encgraph/output_spec.hpp>
#include <encgraph/runtime.hpp>

#include <string>
#include <vector>

namespace encgraph::host {

// The tensor name of output o of item `id`.
std::string embedding_name(const std::string& id, const std::vector<OutputSpec>& outputs, size_t o);

// Throws an Input error (before any work) when one item's tensor name would be
// another's: ids "a" and "a/pooled" with an output named "pooled".
void check_embedding_names(const std::vector<WorkItem>& work,
                           const std::vector<OutputSpec>& outputs);

class EmbeddingSink {
 public:
  EmbeddingSink(const std::string& path, const Model& model, const HostConfig& config);
  // The consumer to hand to execute_workload.
  ResultConsumer consumer();
  // Writes the file; returns the number of items.
  size_t finish();
  size_t items() const { return items_; }
  // Rows written of each output, in the runtime's output order.
  const std::vector<int64_t>& rows() const { return rows_; }
  // "30 rows of 8, f32" and, for each further output, "; 'pooled': 2 rows of 8, f32".
  std::string describe() const;

 private:
  std::vector<OutputSpec> outputs_;
  SafetensorsWriter writer_;
  size_t items_ = 0;
  std::vector<int64_t> rows_;
};

}  // namespace encgraph::host
