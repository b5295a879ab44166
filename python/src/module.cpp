// The compiled part of the `encgraph` Python package (encgraph._encgraph);
// python/encgraph/__init__.py re-exports it. docs/python.md documents the API.
#include "describe.hpp"
#include "errors.hpp"
#include "py_runtime.hpp"
#include "tensor.hpp"

#include <engine_setup.hpp>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>
#include <encgraph/blas_kernels.hpp>

namespace py = pybind11;
using namespace pybind11::literals;

namespace encgraph::python {
namespace {

std::vector<std::filesystem::path> dirs_of(const py::object& dirs) {
  std::vector<std::filesystem::path> out;
  if (dirs.is_none()) return out;
  if (py::isinstance<py::str>(dirs) || py::hasattr(dirs, "__fspath__"))
    throw py::type_error("plugin_dirs takes a list of folders; wrap a single one: [path]");
  for (const py::handle d : dirs)
    out.emplace_back(py::str(py::module_::import("os").attr("fspath")(d)).cast<std::string>());
  return out;
}

}  // namespace
}  // namespace encgraph::python

PYBIND11_MODULE(_encgraph, m) {
  using namespace encgraph::python;
  m.doc() = "encgraph: budget-graph vision encoders (docs/python.md)";
  // At import, while the GIL is held: engine creation (which loads plugins)
  // releases it, and setenv is not safe against other threads' getenv.
  encgraph::choose_blas_kernels();
  m.attr("__version__") = encgraph::host::version_string();
  register_errors(m);

  py::class_<OutputTensor>(m, "OutputTensor",
                           "One named output of one item: [rows, width], a view of the call's "
                           "result (DLPack without copies).")
      .def_property_readonly("name", &OutputTensor::name)
      .def_property_readonly("shape", &OutputTensor::shape)
      .def_property_readonly("dtype", &OutputTensor::dtype)
      .def_property_readonly("device", &OutputTensor::device)
      .def_property_readonly("data_ptr", &OutputTensor::data_ptr)
      .def_property_readonly("nbytes", &OutputTensor::nbytes)
      .def("__dlpack__", &OutputTensor::dlpack, py::kw_only(), "stream"_a = py::none(),
           "max_version"_a = py::none(), "dl_device"_a = py::none(), "copy"_a = py::none())
      .def("__dlpack_device__", &OutputTensor::dlpack_device)
      .def("numpy", &OutputTensor::numpy, "A host copy as a numpy array (bfloat16 as float32).")
      .def("__repr__", &OutputTensor::repr);

  py::class_<ItemResult>(m, "ItemResult",
                         "One item's outputs by name; DLPack and numpy() act on the first "
                         "(primary) output.")
      .def("keys", &ItemResult::keys)
      .def("__getitem__", &ItemResult::get)
      .def("__contains__", &ItemResult::contains)
      .def("__len__", &ItemResult::num_outputs)
      .def("__iter__", [](const ItemResult& r) { return py::iter(r.keys()); })
      .def_property_readonly("primary", &ItemResult::primary)
      .def_property_readonly("tokens", &ItemResult::tokens)
      .def_property_readonly("shape", [](const ItemResult& r) { return r.primary().shape(); })
      .def_property_readonly("dtype", [](const ItemResult& r) { return r.primary().dtype(); })
      .def_property_readonly("device", [](const ItemResult& r) { return r.primary().device(); })
      .def_property_readonly("data_ptr", [](const ItemResult& r) { return r.primary().data_ptr(); })
      .def(
          "__dlpack__",
          [](const ItemResult& r, const py::object& stream, const py::object& max_version,
             const py::object& dl_device, const py::object& copy) {
            return r.primary().dlpack(stream, max_version, dl_device, copy);
          },
          py::kw_only(), "stream"_a = py::none(), "max_version"_a = py::none(),
          "dl_device"_a = py::none(), "copy"_a = py::none())
      .def("__dlpack_device__", [](const ItemResult& r) { return r.primary().dlpack_device(); })
      .def("numpy", [](const ItemResult& r) { return r.primary().numpy(); })
      .def("__repr__", &ItemResult::repr);

  py::class_<PyRuntime>(m, "Runtime")
      .def(py::init([](const py::object& config, const py::kwargs& overrides) {
             return std::make_unique<PyRuntime>(config, overrides);
           }),
           "config"_a = py::none())
      .def("capture", &PyRuntime::capture)
      .def_property_readonly("is_captured", &PyRuntime::is_captured)
      .def("encode", &PyRuntime::encode, "images"_a = py::none(), "videos"_a = py::none(),
           py::kw_only(), "out"_a = py::none())
      .def("stats", &PyRuntime::stats)
      .def_property_readonly("plan", &PyRuntime::plan)
      .def_property_readonly("model_info", &PyRuntime::model_info)
      .def_property_readonly("config", &PyRuntime::config_info)
      .def("close", &PyRuntime::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyRuntime& r, const py::object&, const py::object&, const py::object&) {
        r.close();
      });

  m.def(
      "plugins",
      [](const py::object& plugin_dirs, bool include_rejected) {
        return describe_plugins(dirs_of(plugin_dirs), include_rejected);
      },
      "plugin_dirs"_a = py::none(), "include_rejected"_a = false,
      "Every plugin on the search path (as `encgraph plugins` lists them).");
}
