// Typed, bounds-checked views over the runtime's eg_tensor memory: graph
// buffers and outputs in forward, host staging in prepare_*_staging /
// prepare_replay_buffers (with the `rows` the plugin reports), and shapes.
// A wrong dtype is a plugin bug (EG_ERR_INTERNAL); a row past the buffer means
// the batch does not fit its shape (EG_ERR_INVALID_ARGUMENT).
#pragma once

#include <encgraph/sdk/error.hpp>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

namespace encgraph::sdk {

inline const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32: return "f32";
    case EG_DTYPE_F16: return "f16";
    case EG_DTYPE_BF16: return "bf16";
    case EG_DTYPE_F64: return "f64";
    case EG_DTYPE_I32: return "i32";
    case EG_DTYPE_I64: return "i64";
    case EG_DTYPE_U8: return "u8";
    default: return "unknown dtype";
  }
}

// Whether elements of `dtype` may be viewed as T (16-bit floats as uint16_t).
template <class T>
constexpr bool dtype_matches(int32_t dtype) {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, float>) return dtype == EG_DTYPE_F32;
  if constexpr (std::is_same_v<U, double>) return dtype == EG_DTYPE_F64;
  if constexpr (std::is_same_v<U, int32_t>) return dtype == EG_DTYPE_I32;
  if constexpr (std::is_same_v<U, int64_t>) return dtype == EG_DTYPE_I64;
  if constexpr (std::is_same_v<U, uint8_t>) return dtype == EG_DTYPE_U8;
  if constexpr (std::is_same_v<U, uint16_t>) return dtype == EG_DTYPE_F16 || dtype == EG_DTYPE_BF16;
  return false;
}

// A shape a plugin returns from buffer_shape / output_shape, rows first:
// Shape{budget, 3}; Shape{} is a scalar.
struct Shape {
  int32_t ndim = 0;
  int64_t dims[EG_MAX_DIMS] = {};
  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    if (d.size() > EG_MAX_DIMS)
      fail(EG_ERR_INTERNAL, "a shape has at most " + std::to_string(EG_MAX_DIMS) + " dimensions");
    for (int64_t v : d) dims[ndim++] = v;
  }
  void write(eg_tensor* out, int32_t dtype, int32_t device) const noexcept {
    *out = eg_tensor{};
    out->dtype = dtype;
    out->device = device;
    out->ndim = ndim;
    for (int32_t i = 0; i < ndim; ++i) out->shape[i] = dims[i];
  }
};

// rows x width elements of T: rows is shape[0] (1 for a scalar), width the
// product of the other dimensions. `what` names the tensor in errors.
template <class T>
class TensorView {
 public:
  TensorView(const eg_tensor& t, std::string what) : what_(std::move(what)) {
    if (!dtype_matches<T>(t.dtype))
      fail(EG_ERR_INTERNAL, what_ + " holds " + dtype_name(t.dtype) +
                                " elements; the plugin viewed it as another type");
    if (t.ndim < 0 || t.ndim > EG_MAX_DIMS)
      fail(EG_ERR_INTERNAL, what_ + " has " + std::to_string(t.ndim) + " dimensions");
    rows_ = t.ndim == 0 ? 1 : t.shape[0];
    for (int32_t d = 1; d < t.ndim; ++d) width_ *= t.shape[d];
    if (rows_ < 0 || width_ < 0) fail(EG_ERR_INTERNAL, what_ + " has a negative dimension");
    data_ = static_cast<T*>(t.data);
    if (!data_ && rows_ * width_ > 0) fail(EG_ERR_INTERNAL, what_ + " has no memory");
  }

  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  int64_t size() const { return rows_ * width_; }
  T* data() const { return data_; }
  const std::string& name() const { return what_; }

  // Row r's `width()` elements.
  T* row(int64_t r) const {
    check_rows(r, 1);
    return data_ + r * width_;
  }
  T& at(int64_t r, int64_t c = 0) const {
    check_rows(r, 1);
    if (c < 0 || c >= width_)
      fail(EG_ERR_INTERNAL, what_ + ": column " + std::to_string(c) + " is outside its " +
                                std::to_string(width_) + " columns");
    return data_[r * width_ + c];
  }
  // Rows [first, first + n) exist.
  void check_rows(int64_t first, int64_t n) const {
    if (first < 0 || n < 0 || first + n > rows_)
      invalid(what_ + " holds " + std::to_string(rows_) + " rows; rows [" + std::to_string(first) +
              ", " + std::to_string(first + n) +
              ") do not fit (the batch is larger than its shape)");
  }

 private:
  std::string what_;
  T* data_ = nullptr;
  int64_t rows_ = 0;
  int64_t width_ = 1;
};

// Host staging of one buffer: write the real rows from the top, then say how
// many (set_rows or the append/push cursor); the runtime pads the rest with the
// buffer's padding logic. Untouched, `rows` stays -1: the buffer keeps its
// captured values (docs/plugin-abi.md §9).
template <class T>
class Staging : public TensorView<T> {
 public:
  Staging(eg_replay_buffer& b, const std::string& what)
      : TensorView<T>(b.staging, "buffer '" + what + "' (staging)"), buffer_(&b) {}

  void set_rows(int64_t n) {
    this->check_rows(0, n);
    buffer_->rows = n;
    cursor_ = n;
  }
  int64_t rows_written() const { return buffer_->rows; }
  // The next `n` rows at the cursor (checked), counted as written.
  T* append(int64_t n) {
    this->check_rows(cursor_, n);
    T* p = this->data() + cursor_ * this->width();
    cursor_ += n;
    buffer_->rows = cursor_;
    return p;
  }
  // Copies `n` rows of width() elements from `src` at the cursor.
  void append(const T* src, int64_t n) {
    T* dst = append(n);
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n * this->width()) * sizeof(T));
  }
  // One row of one element (offsets, counts).
  void push(T value) {
    if (this->width() != 1)
      fail(EG_ERR_INTERNAL, this->name() + " rows have " + std::to_string(this->width()) +
                                " elements; push() writes one");
    *append(1) = value;
  }

 private:
  eg_replay_buffer* buffer_;
  int64_t cursor_ = 0;
};

// Host staging of a buffer whose element type the plugin picks at run time
// (f32 on the CPU, bf16 on CUDA): raw bytes for a kit routine that knows the
// dtype, with the same row bounds and `rows` reporting as Staging<T>.
class UntypedStaging {
 public:
  UntypedStaging(eg_replay_buffer& b, const std::string& what)
      : buffer_(&b), what_("buffer '" + what + "' (staging)") {
    const eg_tensor& t = b.staging;
    if (t.ndim < 1 || t.ndim > EG_MAX_DIMS)
      fail(EG_ERR_INTERNAL, what_ + " has " + std::to_string(t.ndim) + " dimensions");
    rows_ = t.shape[0];
    for (int32_t d = 1; d < t.ndim; ++d) width_ *= t.shape[d];
    if (rows_ < 0 || width_ < 0) fail(EG_ERR_INTERNAL, what_ + " has a negative dimension");
    if (!t.data && rows_ * width_ > 0) fail(EG_ERR_INTERNAL, what_ + " has no memory");
  }
  int32_t dtype() const { return buffer_->staging.dtype; }
  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  void* data() const { return buffer_->staging.data; }
  // Reports the first `n` rows as written; more than the buffer holds means
  // the batch does not fit its shape (EG_ERR_INVALID_ARGUMENT).
  void set_rows(int64_t n) {
    if (n < 0 || n > rows_)
      invalid(what_ + " holds " + std::to_string(rows_) + " rows; rows [0, " + std::to_string(n) +
              ") do not fit (the batch is larger than its shape)");
    buffer_->rows = n;
  }

 private:
  eg_replay_buffer* buffer_;
  std::string what_;
  int64_t rows_ = 0;
  int64_t width_ = 1;
};

// The staging of every buffer of one call, by declared index, with names.
class StagingSet {
 public:
  StagingSet(eg_replay_buffer* buffers, int32_t count, const eg_model_info& info)
      : buffers_(buffers), count_(count), info_(&info) {}
  int32_t size() const { return count_; }
  template <class T>
  Staging<T> get(int32_t index) const {
    check(index);
    const char* name = index < info_->num_buffers ? info_->buffers[index].name : nullptr;
    return Staging<T>(buffers_[index], name ? name : std::to_string(index));
  }
  // Says buffer `index` was left unwritten (rows = -1, as the runtime presets
  // it): zero in capture staging, its captured values kept on replay
  // (docs/plugin-abi.md §9). For a call that must not depend on the preset.
  void leave(int32_t index) const {
    check(index);
    buffers_[index].rows = -1;
  }
  // Buffer `index` as bytes (its dtype chosen at run time, see UntypedStaging).
  UntypedStaging untyped(int32_t index) const {
    check(index);
    const char* name = index < info_->num_buffers ? info_->buffers[index].name : nullptr;
    return UntypedStaging(buffers_[index], name ? name : std::to_string(index));
  }

 private:
  void check(int32_t index) const {
    if (index < 0 || index >= count_)
      fail(EG_ERR_INTERNAL, "staging: no buffer " + std::to_string(index) +
                                " (the runtime passed " + std::to_string(count_) + ")");
  }
  eg_replay_buffer* buffers_;
  int32_t count_;
  const eg_model_info* info_;
};

}  // namespace encgraph::sdk
