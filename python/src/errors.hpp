// encgraph.Error and its subclasses, and the translation of encgraph::Error
// (by its ErrorKind) into them, keeping the host's message.
#pragma once

#include <pybind11/pybind11.h>

namespace encgraph::python {

// Creates the exception types in `m` and registers the translator.
void register_errors(pybind11::module_& m);

// Raise from the module's own checks (argument types are TypeError/ValueError).
[[noreturn]] void raise_input(const std::string& message);
[[noreturn]] void raise_config(const std::string& message);

}  // namespace encgraph::python
