#include "tensor.hpp"

#include "dlpack.hpp"

#include <pybind11/numpy.h>

#include <cstring>

namespace py = pybind11;

namespace encgraph::python {
namespace {

namespace dl = dlpack;

size_t element_size(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F64:
    case EG_DTYPE_I64: return 8;
    case EG_DTYPE_F32:
    case EG_DTYPE_I32: return 4;
    case EG_DTYPE_F16:
    case EG_DTYPE_BF16: return 2;
    default: return 1;
  }
}

dl::DLDataType dl_dtype(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32: return {dl::kDLFloat, 32, 1};
    case EG_DTYPE_F16: return {dl::kDLFloat, 16, 1};
    case EG_DTYPE_BF16: return {dl::kDLBfloat, 16, 1};
    case EG_DTYPE_F64: return {dl::kDLFloat, 64, 1};
    case EG_DTYPE_I32: return {dl::kDLInt, 32, 1};
    case EG_DTYPE_I64: return {dl::kDLInt, 64, 1};
    default: return {dl::kDLUInt, 8, 1};
  }
}

dl::DLDevice dl_device(const HeldResult& held) {
  if (held.result.device() == EG_DEVICE_CUDA) return {dl::kDLCUDA, held.device_id};
  return {dl::kDLCPU, 0};
}

// What a capsule owns: a reference to the result (its memory), the shape,
// and the managed tensor the consumer receives. Freed by the tensor's deleter.
struct ExportContext {
  SharedResult keep;
  int64_t shape[2] = {0, 0};
  dl::DLManagedTensor legacy{};
  dl::DLManagedTensorVersioned versioned{};
};

void delete_legacy(dl::DLManagedTensor* t) {
  delete static_cast<ExportContext*>(t->manager_ctx);
}
void delete_versioned(dl::DLManagedTensorVersioned* t) {
  delete static_cast<ExportContext*>(t->manager_ctx);
}

// A capsule never consumed (still named "dltensor"/"dltensor_versioned")
// frees its tensor; a consumer renames it "used_..." and calls the deleter
// itself. Any pending Python error is kept as it was (the spec's advice).
template <class Managed>
void capsule_destructor(PyObject* capsule, const char* name) {
  if (!PyCapsule_IsValid(capsule, name)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed && managed->deleter) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}
void legacy_destructor(PyObject* capsule) {
  capsule_destructor<dl::DLManagedTensor>(capsule, "dltensor");
}
void versioned_destructor(PyObject* capsule) {
  capsule_destructor<dl::DLManagedTensorVersioned>(capsule, "dltensor_versioned");
}

// `rows` x `width` elements of `dtype` at `src` as a new numpy array.
py::object numpy_copy(int32_t dtype, int64_t rows, int64_t width, const uint8_t* src) {
  const std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(rows),
                                          static_cast<py::ssize_t>(width)};
  const size_t n = static_cast<size_t>(rows * width);
  if (dtype == EG_DTYPE_BF16) {  // widened: numpy has no bfloat16
    py::array_t<float> out(shape);
    float* dst = out.mutable_data();
    for (size_t k = 0; k < n; ++k) {
      const uint32_t bits = static_cast<uint32_t>(src[2 * k] | (src[2 * k + 1] << 8)) << 16;
      std::memcpy(dst + k, &bits, 4);
    }
    return out;
  }
  py::array out(py::dtype(dtype_name(dtype)), shape);
  if (n) std::memcpy(out.mutable_data(), src, n * element_size(dtype));
  return out;
}

}  // namespace

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32: return "float32";
    case EG_DTYPE_F16: return "float16";
    case EG_DTYPE_BF16: return "bfloat16";
    case EG_DTYPE_F64: return "float64";
    case EG_DTYPE_I32: return "int32";
    case EG_DTYPE_I64: return "int64";
    case EG_DTYPE_U8: return "uint8";
    default: return "unknown";
  }
}

py::tuple OutputTensor::shape() const {
  const eg_tensor t = result_->result.item(item_, output_);
  return py::make_tuple(t.shape[0], t.shape[1]);
}

std::string OutputTensor::dtype() const {
  return dtype_name(result_->result.dtype(output_));
}

std::string OutputTensor::device() const {
  if (result_->result.device() == EG_DEVICE_CUDA)
    return "cuda:" + std::to_string(result_->device_id);
  return "cpu";
}

uintptr_t OutputTensor::data_ptr() const {
  return reinterpret_cast<uintptr_t>(result_->result.item(item_, output_).data);
}

int64_t OutputTensor::nbytes() const {
  const eg_tensor t = result_->result.item(item_, output_);
  return t.shape[0] * t.shape[1] * static_cast<int64_t>(element_size(t.dtype));
}

py::tuple OutputTensor::dlpack_device() const {
  const dl::DLDevice d = dl_device(*result_);
  return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
}

py::capsule OutputTensor::dlpack(const py::object& stream, const py::object& max_version,
                                 const py::object& dl_device_arg, const py::object& copy) const {
  (void)stream;  // every row is written before export (wait below): any stream may read
  if (!copy.is_none() && copy.cast<bool>())
    throw py::buffer_error(
        "encgraph exports results without copying (copy=True asked for a copy); use "
        "encode(..., out=\"numpy\") or copy the imported tensor");
  const dl::DLDevice device = dl_device(*result_);
  if (!dl_device_arg.is_none()) {
    const py::tuple want = dl_device_arg;
    if (want.size() != 2 || want[0].cast<int>() != static_cast<int>(device.device_type) ||
        want[1].cast<int>() != device.device_id)
      throw py::buffer_error("the result lives on " + device_name_text() +
                             "; export to another device is not supported");
  }
  {
    py::gil_scoped_release release;
    result_->result.wait();
  }
  auto context = std::make_unique<ExportContext>();
  context->keep = result_;
  const eg_tensor t = result_->result.item(item_, output_);
  context->shape[0] = t.shape[0];
  context->shape[1] = t.shape[1];
  dl::DLTensor tensor{};
  tensor.data = t.data;
  tensor.device = device;
  tensor.ndim = 2;
  tensor.dtype = dl_dtype(t.dtype);
  tensor.shape = context->shape;
  tensor.strides = nullptr;  // compact row-major
  tensor.byte_offset = 0;
  const bool versioned =
      !max_version.is_none() && py::tuple(max_version).size() >= 1 &&
      py::tuple(max_version)[0].cast<int>() >= static_cast<int>(dl::kMajorVersion);
  PyObject* capsule = nullptr;
  ExportContext* raw = context.get();
  if (versioned) {
    raw->versioned.version = {dl::kMajorVersion, dl::kMinorVersion};
    raw->versioned.manager_ctx = raw;
    raw->versioned.deleter = delete_versioned;
    raw->versioned.flags = 0;
    raw->versioned.dl_tensor = tensor;
    capsule = PyCapsule_New(&raw->versioned, "dltensor_versioned", versioned_destructor);
  } else {
    raw->legacy.dl_tensor = tensor;
    raw->legacy.manager_ctx = raw;
    raw->legacy.deleter = delete_legacy;
    capsule = PyCapsule_New(&raw->legacy, "dltensor", legacy_destructor);
  }
  if (!capsule) throw py::error_already_set();
  context.release();  // owned by the capsule (or its consumer) from here
  return py::reinterpret_steal<py::capsule>(capsule);
}

py::object OutputTensor::numpy() const {
  const Result& r = result_->result;
  const std::vector<uint8_t> host = [&] {
    py::gil_scoped_release release;
    return r.to_host(output_);
  }();
  const eg_tensor t = r.item(item_, output_);
  return numpy_copy(t.dtype, t.shape[0], t.shape[1], host.data() + r.host_offset(item_, output_));
}

std::string OutputTensor::repr() const {
  const eg_tensor t = result_->result.item(item_, output_);
  return "<encgraph.OutputTensor '" + name() + "' shape=(" + std::to_string(t.shape[0]) + ", " +
         std::to_string(t.shape[1]) + ") dtype=" + dtype() + " device=" + device() + ">";
}

std::string OutputTensor::device_name_text() const {
  return device();
}

py::list ItemResult::keys() const {
  py::list names;
  for (const auto& o : result_->result.outputs()) names.append(o.name);
  return names;
}

OutputTensor ItemResult::get(const py::object& key) const {
  const Result& r = result_->result;
  if (py::isinstance<py::str>(key)) {
    const std::string name = key.cast<std::string>();
    if (const auto o = r.find_output(name)) return OutputTensor(result_, item_, *o);
    std::string names;
    for (const auto& o : r.outputs()) names += (names.empty() ? "'" : ", '") + o.name + "'";
    throw py::key_error("no output named '" + name + "'; the plugin's outputs are " + names);
  }
  if (py::isinstance<py::int_>(key) && !py::isinstance<py::bool_>(key)) {
    const int64_t o = key.cast<int64_t>();
    const int64_t n = static_cast<int64_t>(r.num_outputs());
    if (o < -n || o >= n)
      throw py::index_error("output index " + std::to_string(o) +
                            " out of range: " + std::to_string(n) + " outputs");
    return OutputTensor(result_, item_, static_cast<size_t>(o < 0 ? o + n : o));
  }
  throw py::type_error("outputs are looked up by name (str) or position (int)");
}

std::string ItemResult::repr() const {
  std::string outputs;
  for (const auto& o : result_->result.outputs()) {
    const eg_tensor t = result_->result.item(item_, *result_->result.find_output(o.name));
    outputs += (outputs.empty() ? "" : ", ") + o.name + ": (" + std::to_string(t.shape[0]) + ", " +
               std::to_string(t.shape[1]) + ")";
  }
  return "<encgraph.ItemResult " + outputs + ">";
}

py::dict numpy_outputs(const Result& result, size_t item,
                       const std::vector<std::vector<uint8_t>>& host_outputs) {
  py::dict out;
  for (size_t o = 0; o < result.num_outputs(); ++o) {
    const eg_tensor t = result.item(item, o);
    out[py::str(result.output(o).name)] = numpy_copy(
        t.dtype, t.shape[0], t.shape[1], host_outputs[o].data() + result.host_offset(item, o));
  }
  return out;
}

}  // namespace encgraph::python
