#include "errors.hpp"

#include <encgraph/error.hpp>

namespace py = pybind11;

namespace encgraph::python {
namespace {

// Owned by the module for the life of the interpreter (never decref'd: the
// translator may run until the very end).
PyObject* g_error = nullptr;
PyObject* g_config = nullptr;
PyObject* g_plugin = nullptr;
PyObject* g_input = nullptr;
PyObject* g_device = nullptr;

PyObject* make_type(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("encgraph.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;
}

PyObject* type_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Config: return g_config;
    case ErrorKind::Plugin: return g_plugin;
    case ErrorKind::Input: return g_input;
    case ErrorKind::Device: return g_device;
    case ErrorKind::Internal: break;
  }
  return g_error;
}

}  // namespace

void register_errors(py::module_& m) {
  g_error = make_type(m, "Error", PyExc_Exception,
                      "Base of every encgraph error; the message names what failed and the fix.");
  // Config and input errors are also ValueErrors: the caller passed a bad value.
  const py::tuple value_bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  const py::tuple runtime_bases =
      py::make_tuple(py::handle(g_error), py::handle(PyExc_RuntimeError));
  g_config = make_type(m, "ConfigError", value_bases.ptr(),
                       "A bad configuration key or value (the CLI's exit code 2).");
  g_input = make_type(m, "InputError", value_bases.ptr(),
                      "A bad image, video or file (the CLI's exit code 2).");
  g_plugin = make_type(m, "PluginError", runtime_bases.ptr(),
                       "A plugin could not be loaded or failed a call.");
  g_device = make_type(m, "DeviceError", runtime_bases.ptr(),
                       "A device (CUDA) call failed, out of memory included.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(type_for(e.kind()), e.what());
    }
  });
}

void raise_input(const std::string& message) {
  throw Error(ErrorKind::Input, message);
}

void raise_config(const std::string& message) {
  throw Error(ErrorKind::Config, message);
}

}  // namespace encgraph::python
