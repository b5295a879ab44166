#include "device_backend.hpp"

#include <encgraph/error.hpp>
#include <encgraph/result.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace encgraph {
namespace {

// Each output's region starts on this boundary, like every device buffer.
constexpr size_t kRegionAlignment = 256;

float bf16_to_float(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
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

template <class T>
float load_as_float(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<float>(v);
}

float element_as_float(int32_t dtype, const uint8_t* p) {
  switch (dtype) {
    case EG_DTYPE_F32: return load_as_float<float>(p);
    case EG_DTYPE_F64: return load_as_float<double>(p);
    case EG_DTYPE_BF16: return bf16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    case EG_DTYPE_F16: return f16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    case EG_DTYPE_I32: return load_as_float<int32_t>(p);
    case EG_DTYPE_I64: return load_as_float<int64_t>(p);
    case EG_DTYPE_U8: return static_cast<float>(p[0]);
    default: throw Error(ErrorKind::Internal, "item_as_float: unknown output dtype");
  }
}

[[noreturn]] void bad_layout(const std::string& what) {
  throw Error(ErrorKind::Internal, "Result layout: " + what);
}

}  // namespace

Result::Result(std::shared_ptr<DeviceBackend> backend, std::vector<OutputSpec> outputs,
               std::vector<std::vector<int64_t>> rows, std::vector<std::vector<int64_t>> offsets)
    : outputs_(std::move(outputs)),
      rows_(std::move(rows)),
      offsets_(std::move(offsets)),
      backend_(std::move(backend)) {
  if (!backend_) bad_layout("no device backend");
  if (outputs_.empty()) bad_layout("no outputs");
  if (rows_.size() != outputs_.size() || offsets_.size() != outputs_.size())
    bad_layout("rows and offsets must have one list per output");
  const size_t items = rows_[0].size();
  size_t bytes = 0;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (rows_[o].size() != items || offsets_[o].size() != items)
      bad_layout("output '" + outputs_[o].name + "' lists another number of items");
    const size_t es = dtype_size(outputs_[o].dtype);
    if (es == 0 || outputs_[o].width <= 0)
      bad_layout("output '" + outputs_[o].name + "' has no width or an unknown dtype");
    int64_t end = 0;  // rows the region holds: past the last item's rows
    for (size_t i = 0; i < items; ++i) {
      if (rows_[o][i] < 0 || offsets_[o][i] < 0)
        bad_layout("negative rows or offset for item " + std::to_string(i));
      end = std::max(end, offsets_[o][i] + rows_[o][i]);
    }
    total_rows_.push_back(end);
    bytes = (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
    region_.push_back(bytes);
    bytes += static_cast<size_t>(end) * static_cast<size_t>(outputs_[o].width) * es;
  }
  device_ = backend_->type();
  // One stream-ordered allocation per call: freeing it never waits for the device.
  void* mem = backend_->alloc_async(std::max<size_t>(bytes, 1), "the call's results");
  auto owner = backend_;
  memory_ = std::shared_ptr<void>(mem, [owner](void* p) { owner->free_async(p); });
}

Result::Result(Result&&) noexcept = default;
Result& Result::operator=(Result&&) noexcept = default;
Result::~Result() = default;

std::optional<size_t> Result::find_output(const std::string& name) const {
  for (size_t o = 0; o < outputs_.size(); ++o)
    if (outputs_[o].name == name) return o;
  return std::nullopt;
}

void* Result::output_data(size_t o) const {
  return static_cast<char*>(memory_.get()) + region_.at(o);
}

size_t Result::host_offset(size_t i, size_t o) const {
  return static_cast<size_t>(offsets_.at(o).at(i)) * static_cast<size_t>(outputs_.at(o).width) *
         dtype_size(outputs_[o].dtype);
}

eg_tensor Result::item(size_t i, size_t o) const {
  eg_tensor t{};
  t.data = static_cast<char*>(output_data(o)) + host_offset(i, o);
  t.dtype = outputs_[o].dtype;
  t.device = device_;
  t.ndim = 2;
  t.shape[0] = rows_[o][i];
  t.shape[1] = outputs_[o].width;
  return t;
}

void Result::wait() const {
  if (!backend_) return;
  if (!written_) {
    backend_->synchronize();
    return;
  }
  written_->wait();
  backend_->finish_copies_out();
}

void Result::mark_written() {
  if (backend_) written_ = backend_->mark_stream();
}

void Result::copy_to_host(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (written_)
    backend_->copy_to_host_after(*written_, dst, src, bytes);
  else
    backend_->copy_to_host(dst, src, bytes);
}

std::vector<uint8_t> Result::to_host(size_t o) const {
  const size_t bytes = static_cast<size_t>(total_rows_.at(o)) *
                       static_cast<size_t>(outputs_[o].width) * dtype_size(outputs_[o].dtype);
  std::vector<uint8_t> host(bytes);
  if (bytes == 0) return host;
  copy_to_host(host.data(), output_data(o), bytes);
  wait();
  return host;
}

void Result::copy_item_to_host(size_t i, size_t o, void* dst) const {
  const eg_tensor t = item(i, o);
  copy_to_host(dst, t.data, static_cast<size_t>(t.shape[0] * t.shape[1]) * dtype_size(t.dtype));
}

std::vector<float> Result::item_as_float(size_t i, size_t o) const {
  const eg_tensor t = item(i, o);
  const size_t count = static_cast<size_t>(t.shape[0] * t.shape[1]);
  const size_t es = dtype_size(t.dtype);
  std::vector<uint8_t> raw(count * es);
  if (!raw.empty()) {
    copy_to_host(raw.data(), t.data, raw.size());
    wait();
  }
  std::vector<float> out(count);
  for (size_t k = 0; k < count; ++k) out[k] = element_as_float(t.dtype, raw.data() + k * es);
  return out;
}

const std::vector<int64_t>& Result::axis_keys(size_t i) const {
  static const std::vector<int64_t> none;
  if (i >= size()) throw Error(ErrorKind::Input, "axis_keys: no item " + std::to_string(i));
  return i < axis_keys_.size() ? axis_keys_[i] : none;
}

void Result::set_axis_keys(size_t i, const std::vector<int64_t>& keys) {
  if (i >= size()) bad_layout("axis keys for item " + std::to_string(i));
  if (axis_keys_.size() < size()) axis_keys_.resize(size());
  axis_keys_[i] = keys;
}

}  // namespace encgraph
