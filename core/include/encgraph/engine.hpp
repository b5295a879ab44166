// The one execution interface a serving program (and the encgraph host) drives:
// a single Runtime, or a DataParallelRuntime spreading each request over ranks.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/item.hpp>
#include <encgraph/load_balance.hpp>
#include <encgraph/model.hpp>
#include <encgraph/result.hpp>
#include <encgraph/stats.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace encgraph {

// A request made ready to execute: each item made on the rank that runs it, and
// the assignment. Making items runs the plugin's preprocessing, so a caller
// timing execution prepares first. One rank for a single Runtime.
struct Request {
  std::vector<std::vector<Item>> rank_items;  // rank r's items, in assignment order
  RankAssignment assignment;
  std::vector<int64_t> tokens;  // output rows of each item, in the caller's order
  size_t size() const { return tokens.size(); }
};

enum class ExecuteMode {
  Planned,  // graphs where they fit (and are expected faster), eager elsewhere
  Eager,    // every batch eagerly at its exact token count, the graphs' batch shape
  // Every item alone, eagerly, in a shape of exactly its size: max_batch_size 1,
  // max_frames_per_batch its frames, the axis keys it selects alone. Buffers
  // sized from such a shape need no padding, so a wrong padding logic cannot
  // reach the output (verify's reference).
  Reference,
};

// Attaches item i's pixels to `desc` (decoding its files) just before the
// item is made; what it returns keeps them alive until then.
using PixelLoader = std::function<std::shared_ptr<const void>(size_t i, eg_item_desc& desc)>;

// What an error names item i by: labels[i] (a file, a trace line), else "item i".
std::string item_label(const std::vector<std::string>& labels, size_t i);

class Engine {
 public:
  virtual ~Engine() = default;
  virtual void capture() = 0;
  virtual bool is_captured() const = 0;
  // The descriptions' pixels need only live through this call. labels[i], when
  // given, names item i in errors (else "item i").
  virtual Request prepare(const std::vector<eg_item_desc>& items,
                          const std::vector<std::string>& labels = {}) = 0;
  // Like prepare, with pixels from `load`, called only for the items this
  // process makes: items are assigned to ranks from their geometry (the
  // plugin's item_spec_for_desc), so a rank decodes only its own files.
  // `items` give the geometry; their pixels may be null. By default every
  // item is loaded, then prepare() runs.
  virtual Request prepare_lazy(const std::vector<eg_item_desc>& items,
                               const std::vector<std::string>& labels, const PixelLoader& load);
  // Runs a request; the result is on the device of the rank that asked (rank
  // 0 of a DataParallelRuntime), items in the caller's order.
  virtual Result execute(const Request& request, ExecuteMode mode = ExecuteMode::Planned) = 0;
  // Summed over ranks.
  virtual Stats stats() const = 0;
  virtual int world_size() const = 0;
  // Rank 0's model: items, description, plan, plugin and device names.
  virtual const Model& model() const = 0;
  virtual Model& model() = 0;
  // Waits for all work every rank has enqueued.
  virtual void synchronize() = 0;
  // This process's rank in a multi-process job (0 otherwise). Only rank 0's
  // execute() returns rows; other ranks get a result of no items.
  virtual int process_rank() const { return 0; }
  // Every rank's device name, in rank order.
  virtual std::vector<std::string> device_names() const;
};

}  // namespace encgraph
