// Reading (and, for tests and tools, writing) safetensors checkpoints: one file,
// or a sharded checkpoint described by model.safetensors.index.json. Files are
// memory-mapped after a stat() that admits regular files only; headers are
// checked as strictly as the reference implementation checks them (see
// parse_safetensors). Every error is an Error(INVALID_ARGUMENT) naming
// plugin.weights, the file and, where one is involved, the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace encoder_kit {

// Weights are read from F32, F16 and BF16; the other dtypes a checkpoint may
// hold are recognised (for the extent checks) as Other.
enum class StDtype { F32, F16, BF16, F64, I32, I64, U8, F8E4M3, Other };

const char* st_dtype_name(StDtype d);
size_t st_dtype_bytes(StDtype d);  // 0 for Other
// Bytes of one element of a dtype as a header spells it ("F8_E4M3": 1), 0
// for a name the format does not define.
size_t st_dtype_bytes(const std::string& name);

// A tensor inside a mapped file; `data` stays valid while its store lives.
struct TensorRef {
  std::string name;
  std::string file;  // the file it lives in, for messages
  StDtype dtype = StDtype::Other;
  std::string dtype_name;  // as written in the header
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t bytes = 0;
};

// The tensors of a safetensors file's bytes (data pointing into `bytes`), or an
// error naming `file` and the tensor. Checked: the header length (within the
// file, at most 100 MiB), a header that is a JSON object, `__metadata__` an
// object of strings, each entry's known dtype, non-negative shape whose element
// count x dtype size equals its data_offsets span, and the spans tiling the
// data section exactly (no overlap, no hole, nothing after the last).
// Pure: no file is touched (fuzz targets call it).
std::vector<TensorRef> parse_safetensors(const std::byte* bytes, size_t size,
                                         const std::string& file);

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  // Maps and validates the header and every tensor's extent (a truncated file
  // fails here, naming the first tensor that does not fit).
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const TensorRef* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<std::string, TensorRef> tensors_;
};

// Tensors by name across one file or the shards of an index; shards are mapped
// on first use.
class TensorStore {
 public:
  // `path`: a .safetensors file, a *.index.json, or a directory holding
  // model.safetensors.index.json, model.safetensors or a single *.safetensors.
  static std::unique_ptr<TensorStore> open(const std::filesystem::path& path);

  const std::string& description() const { return description_; }
  bool contains(const std::string& name) const;
  // Throws Error(NOT_FOUND) naming the tensor and where it was looked for.
  const TensorRef& get(const std::string& name) const;

 private:
  TensorStore() = default;
  const SafetensorsFile& shard(const std::string& file) const;

  std::string description_;
  std::filesystem::path directory_;
  std::map<std::string, std::string> weight_map_;  // sharded: tensor -> shard file name
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;
  std::unique_ptr<SafetensorsFile> single_;
};

// For a missing tensor's message: up to 3 of `names` that end like `wanted`
// (the most trailing dotted components in common, at least 2), as
// " (it holds 'a', 'b': ...)", or "" when none does.
std::string similar_tensor_names(const std::string& wanted, const std::vector<std::string>& names);

// The tensor converted to f32 (from F32, BF16 or F16), after checking its shape
// equals `expected`; errors name the tensor, the file and both shapes. With
// `check_finite`, a NaN or infinity is an error naming the tensor, the element
// and the opt-out key (the check rides on the conversion's one pass).
std::vector<float> read_as_f32(const TensorRef& t, const std::vector<int64_t>& expected,
                               bool check_finite = true);

// An FP8 weight (F8_E4M3 codes, encoder_kit/fp8.hpp) as f32: each code times
// its scale. `scale` holds one value (per tensor) or one per row, the first
// dimension ([rows] or [rows, 1]: per output channel), in any float dtype:
// the layouts NVIDIA Model Optimizer and compressed-tensors save beside each
// weight as `<weight>_scale`. Exact in f32. Errors as read_as_f32's, and a
// scale of another shape names both tensors.
std::vector<float> read_e4m3_as_f32(const TensorRef& t, const TensorRef& scale,
                                    const std::vector<int64_t>& expected, bool check_finite = true);

std::string shape_string(const std::vector<int64_t>& shape);

// A tensor to write: raw little-endian bytes of `dtype` in row-major order.
struct TensorToWrite {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

TensorToWrite f32_tensor(const std::string& name, const std::vector<int64_t>& shape,
                         const std::vector<float>& values);
TensorToWrite bf16_tensor(const std::string& name, const std::vector<int64_t>& shape,
                          const std::vector<float>& values);

// Writes a safetensors file (header padded to 8 bytes, tensors in the given order).
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<TensorToWrite>& tensors);

}  // namespace encoder_kit
