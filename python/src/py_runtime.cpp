#include "py_runtime.hpp"

#include "config_from_python.hpp"
#include "describe.hpp"
#include "errors.hpp"
#include "inputs.hpp"
#include "tensor.hpp"

#include <engine_setup.hpp>

#include <encgraph/error.hpp>
#include <encgraph/runtime.hpp>

#include <algorithm>

namespace py = pybind11;

namespace encgraph::python {
namespace {

// "cuda:1 (NVIDIA H200)" -> 1; 0 for the CPU.
int32_t cuda_ordinal(const std::string& device_name) {
  if (device_name.rfind("cuda:", 0) != 0) return 0;
  int32_t n = 0;
  for (size_t k = 5; k < device_name.size() && device_name[k] >= '0' && device_name[k] <= '9'; ++k)
    n = n * 10 + (device_name[k] - '0');
  return n;
}

// Takes `mutex` with the GIL released: a thread holding the lock may be
// waiting for the GIL to hand its results over.
std::unique_lock<std::mutex> lock_without_gil(std::mutex& mutex) {
  py::gil_scoped_release release;
  return std::unique_lock<std::mutex>(mutex);
}

}  // namespace

PyRuntime::PyRuntime(const py::object& config, const py::dict& overrides) {
  const std::vector<std::string> sets = overrides_from_kwargs(overrides);
  config_ = load_python_config(config, sets);
  host::apply_log_level(config_.log_level);
  {
    py::gil_scoped_release release;  // loading weights takes a while
    engine_ = host::make_engine(config_.runtime, config_.data_parallel);
  }
  device_id_ = cuda_ordinal(engine_->model().device_name());
}

Engine& PyRuntime::engine() {
  if (!engine_) throw Error(ErrorKind::Config, "this Runtime has been closed; make a new one");
  return *engine_;
}

void PyRuntime::capture() {
  auto lock = lock_without_gil(mutex_);
  Engine& e = engine();
  py::gil_scoped_release release;
  e.capture();
}

bool PyRuntime::is_captured() {
  auto lock = lock_without_gil(mutex_);
  return engine().is_captured();
}

py::list PyRuntime::encode(const py::object& images, const py::object& videos,
                           const py::object& out) {
  bool numpy = false;
  if (!out.is_none()) {
    if (!py::isinstance<py::str>(out) || out.cast<std::string>() != "numpy")
      throw py::value_error(
          "out must be None (results sharing memory, DLPack) or \"numpy\" "
          "(copies as numpy arrays), not " +
          std::string(py::repr(out)));
    numpy = true;
    py::module_::import("numpy");  // fail before any work when numpy is missing
  }
  const Inputs inputs = read_inputs(images, videos);
  py::list results;
  if (inputs.sources.empty()) return results;
  const int64_t count = static_cast<int64_t>(inputs.sources.size());
  if (count > config_.limits.max_items)
    raise_input("encode got " + std::to_string(count) + " items, over limits.max_items (" +
                std::to_string(config_.limits.max_items) +
                "); encode them in several calls or raise limits.max_items");
  auto lock = lock_without_gil(mutex_);
  Engine& e = engine();
  const bool has_videos =
      std::any_of(inputs.sources.begin(), inputs.sources.end(),
                  [](const Source& s) { return s.modality == EG_MODALITY_VIDEO; });
  if (has_videos && !e.model().supports_modality(EG_MODALITY_VIDEO))
    raise_input("videos given, but plugin '" + e.model().plugin_name() +
                "' takes images only; pass them as images (one frame each) or use a video plugin");
  if (has_videos && e.model().plan().max_frames_per_batch == 0)
    raise_config(
        "videos given, but the plan allows no frames (budgets.video = false or "
        "budgets.max_frames_per_batch = 0); set budgets.video = true");
  // Requests of workload.request_size items, as `encgraph encode` runs them:
  // only one request's decoded pixels are held at a time.
  const size_t request_size =
      static_cast<size_t>(std::max<int64_t>(1, config_.workload.request_size));
  for (size_t first = 0; first < inputs.sources.size(); first += request_size) {
    const size_t last = std::min(inputs.sources.size(), first + request_size);
    std::shared_ptr<HeldResult> held;
    std::vector<std::vector<uint8_t>> host_outputs;
    {
      py::gil_scoped_release release;
      std::vector<ItemPixels> pixels;
      pixels.reserve(last - first);
      std::vector<eg_item_desc> descs;
      std::vector<std::string> labels;
      for (size_t i = first; i < last; ++i) {
        const Source& s = inputs.sources[i];
        pixels.push_back(load_pixels(s, config_));
        const ItemPixels& p = pixels.back();
        eg_item_desc desc{};
        desc.modality = s.modality;
        desc.channels = 3;
        desc.height = p.height;
        desc.width = p.width;
        desc.frames = p.frames;
        desc.pixels = p.data;
        descs.push_back(desc);
        labels.push_back(s.label);
      }
      const Request request = e.prepare(descs, labels);
      held = std::make_shared<HeldResult>(HeldResult{e.execute(request), device_id_});
      if (numpy)
        for (size_t o = 0; o < held->result.num_outputs(); ++o)
          host_outputs.push_back(held->result.to_host(o));
    }
    for (size_t i = 0; i < last - first; ++i) {
      if (numpy)
        results.append(numpy_outputs(held->result, i, host_outputs));
      else
        results.append(py::cast(ItemResult(held, i)));
    }
  }
  return results;
}

py::dict PyRuntime::stats() {
  auto lock = lock_without_gil(mutex_);
  return describe_stats(engine().stats());
}

py::dict PyRuntime::plan() {
  auto lock = lock_without_gil(mutex_);
  return describe_plan(engine().model());
}

py::dict PyRuntime::model_info() {
  auto lock = lock_without_gil(mutex_);
  py::dict d = describe_model(engine().model());
  d["world_size"] = engine().world_size();
  return d;
}

py::dict PyRuntime::config_info() const {
  py::dict d;
  d["source"] = config_.source;
  d["digest"] = config_.digest;
  d["settings"] = host::canonical_config(config_);
  d["request_size"] = config_.workload.request_size;
  return d;
}

void PyRuntime::close() {
  auto lock = lock_without_gil(mutex_);
  std::unique_ptr<Engine> engine = std::move(engine_);
  py::gil_scoped_release release;
  engine.reset();
}

}  // namespace encgraph::python
