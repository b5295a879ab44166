// Plain Python values (dicts, lists) describing the runtime: its statistics,
// budget plan and model, and the plugins found on the search path.
#pragma once

#include <encgraph/budget_plan.hpp>
#include <encgraph/runtime.hpp>
#include <encgraph/stats.hpp>

#include <pybind11/pybind11.h>

#include <filesystem>
#include <vector>

namespace encgraph::python {

pybind11::dict describe_stats(const Stats& stats);
pybind11::dict describe_plan(const Model& model);
pybind11::dict describe_model(const Model& model);
// Every plugin on the search path (the same survey as `encgraph plugins`).
pybind11::list describe_plugins(const std::vector<std::filesystem::path>& dirs,
                                bool include_rejected);

}  // namespace encgraph::python
