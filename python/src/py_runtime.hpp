// encgraph.Runtime: a host config (file, dict, overrides) made into the
// host's engine (one Runtime, or data-parallel ranks), driven from Python.
// Calls on one Runtime are serialised by its own lock; the GIL is released
// while items are decoded, prepared and executed, so runtimes in other
// threads run at the same time.
#pragma once

#include <config.hpp>

#include <encgraph/engine.hpp>

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>

namespace encgraph::python {

class PyRuntime {
 public:
  PyRuntime(const pybind11::object& config, const pybind11::dict& overrides);

  void capture();
  bool is_captured();
  // One result per item: images first, then videos, each in the order given.
  pybind11::list encode(const pybind11::object& images, const pybind11::object& videos,
                        const pybind11::object& out);
  pybind11::dict stats();
  pybind11::dict plan();
  pybind11::dict model_info();
  pybind11::dict config_info() const;
  void close();

 private:
  // The engine, or a Config error when close() has been called.
  Engine& engine();

  host::HostConfig config_;
  std::unique_ptr<Engine> engine_;
  int32_t device_id_ = 0;
  std::mutex mutex_;  // a Runtime is used from one thread at a time
};

}  // namespace encgraph::python
