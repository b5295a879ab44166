#include "device_backend.hpp"
#include "graph_manager.hpp"
#include "plugin_instance.hpp"

#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstring>

namespace encgraph {
namespace {

float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

struct DeviceChoice {
  eg_device_type type;
  int index;
};

DeviceChoice choose_device(const std::string& device, uint32_t plugin_devices) {
  if (device == "cpu") return {EG_DEVICE_CPU, 0};
  if (device == "cuda") return {EG_DEVICE_CUDA, 0};
  if (device.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      const int index = std::stoi(device.substr(5), &used);
      if (used == device.size() - 5 && index >= 0) return {EG_DEVICE_CUDA, index};
    } catch (const std::exception&) {
    }
  }
  if (device == "auto" || device.empty()) {
    if ((plugin_devices & EG_DEVICE_CUDA) && cuda_device_available()) return {EG_DEVICE_CUDA, 0};
    return {EG_DEVICE_CPU, 0};
  }
  throw_config("runtime.device = \"" + device +
               "\" is not a device; use \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"");
}

}  // namespace

// ---------------------------------------------------------------- Item

Item::Item(Item&& o) noexcept {
  *this = std::move(o);
}
Item& Item::operator=(Item&& o) noexcept {
  if (this != &o) {
    if (item_) owner_->api()->item_destroy(owner_->handle(), item_);
    owner_ = std::move(o.owner_);
    item_ = o.item_;
    spec_ = o.spec_;
    o.item_ = nullptr;
  }
  return *this;
}
Item::~Item() {
  if (item_) owner_->api()->item_destroy(owner_->handle(), item_);
}

// ---------------------------------------------------------------- Result

Result::Result(Result&&) noexcept = default;
Result& Result::operator=(Result&&) noexcept = default;
Result::~Result() = default;

eg_tensor Result::item(size_t i) const {
  eg_tensor t{};
  t.data = static_cast<char*>(memory_.get()) +
           offsets_.at(i) * hidden_ * static_cast<int64_t>(dtype_size(dtype_));
  t.dtype = dtype_;
  t.device = device_;
  t.ndim = 2;
  t.shape[0] = rows_[i];
  t.shape[1] = hidden_;
  return t;
}

size_t Result::element_size() const {
  return dtype_size(dtype_);
}

void Result::wait() const {
  if (backend_) backend_->synchronize();
}

std::vector<uint8_t> Result::to_host() const {
  const size_t bytes = static_cast<size_t>(total_rows_ * hidden_) * dtype_size(dtype_);
  std::vector<uint8_t> host(bytes);
  if (bytes == 0) return host;
  backend_->copy_to_host(host.data(), memory_.get(), bytes);
  backend_->synchronize();
  return host;
}

std::vector<float> Result::item_as_float(size_t i) const {
  const eg_tensor t = item(i);
  const size_t count = static_cast<size_t>(t.shape[0] * t.shape[1]);
  const size_t es = dtype_size(dtype_);
  std::vector<uint8_t> raw(count * es);
  if (!raw.empty()) {
    backend_->copy_to_host(raw.data(), t.data, raw.size());
    backend_->synchronize();
  }
  std::vector<float> out(count);
  for (size_t k = 0; k < count; ++k) {
    const uint8_t* p = raw.data() + k * es;
    switch (dtype_) {
      case EG_DTYPE_F32: std::memcpy(&out[k], p, 4); break;
      case EG_DTYPE_F64: {
        double d;
        std::memcpy(&d, p, 8);
        out[k] = static_cast<float>(d);
        break;
      }
      case EG_DTYPE_BF16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        out[k] = bf16_to_float(v);
        break;
      }
      case EG_DTYPE_F16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        out[k] = f16_to_float(v);
        break;
      }
      default: throw Error(ErrorKind::Internal, "item_as_float: output dtype is not floating");
    }
  }
  return out;
}

// ---------------------------------------------------------------- Runtime

Runtime::Runtime(const RuntimeConfig& config) {
  if (config.plugin.empty()) throw_config("no plugin named: set plugin.name");
  PluginRegistry registry(config.plugin_dirs);
  const LoadedPlugin& plugin = registry.get(config.plugin);
  const DeviceChoice device = choose_device(config.device, plugin.api->devices);
  backend_ = device.type == EG_DEVICE_CUDA ? make_cuda_backend(device.index) : make_cpu_backend();
  backend_->make_current();  // the plugin instance is made on its device
  instance_ = std::make_shared<PluginInstance>(plugin, device.type, device.index, config.weights,
                                               config.plugin_config);
  manager_ = std::make_unique<GraphManager>(backend_, *instance_, config);
}

Runtime::~Runtime() = default;

Item Runtime::make_item(const eg_item_desc& desc) {
  backend_->make_current();
  Item item;
  item.owner_ = instance_;
  instance_->call("item_create", [&](eg_error* e) {
    return instance_->api()->item_create(instance_->handle(), &desc, &item.item_, e);
  });
  if (!item.item_) throw_plugin("plugin '" + instance_->name() + "': item_create returned no item");
  instance_->call("item_spec", [&](eg_error* e) {
    return instance_->api()->item_spec(instance_->handle(), item.item_, &item.spec_, e);
  });
  if (instance_->info().num_paths == 1) item.spec_.path_tokens[0] = item.spec_.output_tokens;
  return item;
}

void Runtime::capture() {
  backend_->make_current();
  manager_->capture();
}
bool Runtime::is_captured() const {
  return manager_->is_captured();
}
void Runtime::clear() {
  manager_->clear();
}
bool Runtime::supports_modality(eg_modality m) const {
  return (instance_->api()->modalities & static_cast<uint32_t>(m)) != 0;
}

Result Runtime::execute(const std::vector<const Item*>& items) {
  backend_->make_current();
  return manager_->execute(items);
}
Result Runtime::execute(const std::vector<Item>& items) {
  std::vector<const Item*> ptrs;
  ptrs.reserve(items.size());
  for (const auto& i : items) ptrs.push_back(&i);
  return execute(ptrs);
}

Stats Runtime::stats() const {
  return manager_->stats();
}
const BudgetPlan& Runtime::plan() const {
  return manager_->plan();
}
const eg_model_info& Runtime::model_info() const {
  return instance_->info();
}
std::string Runtime::plugin_name() const {
  return instance_->name();
}
std::string Runtime::plugin_version() const {
  return instance_->api()->version ? instance_->api()->version : "";
}
void Runtime::synchronize() {
  backend_->synchronize();
}
eg_device_type Runtime::device_type() const {
  return backend_->type();
}
std::string Runtime::device_name() const {
  return backend_->name();
}

}  // namespace encgraph
