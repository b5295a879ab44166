// Runtime(config=..., **overrides): the config as a TOML file path or a dict,
// and keyword overrides, all read by the CLI's own parser (frontend/src/config.*),
// so the keys, checks and messages are the CLI's. A dict is written out as
// TOML text; each override becomes one `--set key=value` string.
#pragma once

#include <config.hpp>

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace encgraph::python {

// Overrides as `--set` strings: `budgets__max_items_per_batch=8` and
// `**{"budgets.max_items_per_batch": 8}` both give
// "budgets.max_items_per_batch=8"; a dict value sets every key under it.
std::vector<std::string> overrides_from_kwargs(const pybind11::dict& kwargs);

// `config`: None (every key from the overrides), a path (str or os.PathLike)
// or a dict of tables. Raises ConfigError as the CLI's config loading does.
host::HostConfig load_python_config(const pybind11::object& config,
                                    const std::vector<std::string>& overrides);

}  // namespace encgraph::python
