#include <encoder_kit/error.hpp>
#include <encoder_kit/fp8.hpp>
#include <encoder_kit/input_file.hpp>
#include <encoder_kit/json.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/safetensors.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

namespace encoder_kit {
namespace fs = std::filesystem;

namespace {

// A header larger than this is not a safetensors file (the format caps it at 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// What to name instead when plugin.weights (or a shard) is the wrong kind of file.
const char* const kWeightsFix =
    "name a .safetensors file, a *.index.json, a checkpoint directory, or \"random\"";

StDtype parse_dtype(const std::string& s) {
  if (s == "F32") return StDtype::F32;
  if (s == "F16") return StDtype::F16;
  if (s == "BF16") return StDtype::BF16;
  if (s == "F64") return StDtype::F64;
  if (s == "I32") return StDtype::I32;
  if (s == "I64") return StDtype::I64;
  if (s == "U8") return StDtype::U8;
  if (s == "F8_E4M3") return StDtype::F8E4M3;
  return StDtype::Other;
}

[[noreturn]] void bad(const std::string& message) {
  fail(EG_ERR_INVALID_ARGUMENT, message);
}

std::string span_string(uint64_t begin, uint64_t end) {
  std::string s = "[";  // appended, not "[" + ...: GCC 12 warns falsely on that (-Wrestrict)
  s += std::to_string(begin);
  s += ", ";
  s += std::to_string(end);
  s += ')';
  return s;
}

// One header entry checked; `data_bytes`: the size of the data section.
TensorRef parse_entry(const std::string& name, const Json& entry, const std::string& file,
                      const std::byte* data, uint64_t data_bytes) {
  const std::string what = "plugin.weights file '" + file + "': tensor '" + name + "'";
  if (!entry.is_object()) bad(what + ": its header entry is not an object");
  TensorRef t;
  t.name = name;
  t.file = file;
  const Json* dtype = entry.find("dtype");
  const Json* shape = entry.find("shape");
  const Json* offsets = entry.find("data_offsets");
  if (!dtype || !shape || !offsets) bad(what + ": header entry lacks dtype, shape or data_offsets");
  t.dtype_name = dtype->as_string(what + " dtype");
  t.dtype = parse_dtype(t.dtype_name);
  const size_t elem = st_dtype_bytes(t.dtype_name);
  if (elem == 0) bad(what + ": unknown dtype '" + t.dtype_name + "'");
  uint64_t count = 1;
  for (const Json& d : shape->as_array(what + " shape")) {
    const int64_t extent = d.as_int(what + " shape entry");
    if (extent < 0) bad(what + ": negative extent " + std::to_string(extent) + " in its shape");
    t.shape.push_back(extent);
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(extent), &count))
      bad(what + ": shape " + shape_string(t.shape) + "... has more elements than 64 bits count");
  }
  uint64_t need = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(elem), &need))
    bad(what + ": shape " + shape_string(t.shape) + " of " + t.dtype_name +
        " needs more bytes than 64 bits count");
  const auto& off = offsets->as_array(what + " data_offsets");
  if (off.size() != 2) bad(what + ": data_offsets must have two entries");
  const int64_t begin = off[0].as_int(what + " data_offsets[0]"),
                end = off[1].as_int(what + " data_offsets[1]");
  if (begin < 0 || end < begin)
    bad(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
        "] are not an ascending pair of non-negative offsets");
  if (static_cast<uint64_t>(end) > data_bytes)
    bad(what + " needs bytes " + span_string(begin, end) +
        " of the data section, but the file holds only " + std::to_string(data_bytes) +
        " (truncated file?)");
  t.bytes = static_cast<size_t>(end - begin);
  if (t.bytes != need)
    bad(what + ": data_offsets span " + std::to_string(t.bytes) + " bytes, but shape " +
        shape_string(t.shape) + " of " + t.dtype_name + " needs " + std::to_string(need));
  t.data = data + begin;
  return t;
}

// The spans must tile the data section as the reference writer lays them out:
// an overlap would let one tensor's bytes be read as another's, a gap or a
// tail means the header does not describe this file.
void check_tiling(std::vector<const TensorRef*> by_offset, const std::byte* data,
                  uint64_t data_bytes, const std::string& file) {
  const std::string where = "plugin.weights file '" + file + "'";
  auto begin_of = [&](const TensorRef* t) { return static_cast<uint64_t>(t->data - data); };
  std::sort(by_offset.begin(), by_offset.end(), [&](const TensorRef* a, const TensorRef* b) {
    return begin_of(a) != begin_of(b) ? begin_of(a) < begin_of(b) : a->bytes < b->bytes;
  });
  uint64_t covered = 0;
  const TensorRef* previous = nullptr;
  for (const TensorRef* t : by_offset) {
    const uint64_t b = begin_of(t), e = b + t->bytes;
    if (b < covered)
      bad(where + ": tensor '" + t->name + "' (bytes " + span_string(b, e) +
          " of the data section) overlaps tensor '" + previous->name + "' (bytes " +
          span_string(begin_of(previous), covered) + "): the header is damaged");
    if (b > covered)
      bad(where + ": bytes " + span_string(covered, b) +
          " of the data section belong to no tensor (a hole before tensor '" + t->name +
          "'): the header does not describe this file");
    covered = e;
    previous = t;
  }
  if (covered != data_bytes)
    bad(where + ": the data section has " + std::to_string(data_bytes - covered) +
        " bytes after the last tensor's end (" + std::to_string(covered) +
        "): the header does not describe this file (damaged or appended to?)");
}

std::string relative_shard_problem(const std::string& file) {
  const fs::path p(file);
  if (file.empty()) return "is empty";
  if (p.is_absolute()) return "is an absolute path";
  for (const auto& part : p)
    if (part == "..") return "leaves the checkpoint directory ('..')";
  return "";
}

}  // namespace

const char* st_dtype_name(StDtype d) {
  switch (d) {
    case StDtype::F32: return "F32";
    case StDtype::F16: return "F16";
    case StDtype::BF16: return "BF16";
    case StDtype::F64: return "F64";
    case StDtype::I32: return "I32";
    case StDtype::I64: return "I64";
    case StDtype::U8: return "U8";
    case StDtype::F8E4M3: return "F8_E4M3";
    default: return "unsupported";
  }
}

size_t st_dtype_bytes(StDtype d) {
  switch (d) {
    case StDtype::F32:
    case StDtype::I32: return 4;
    case StDtype::F16:
    case StDtype::BF16: return 2;
    case StDtype::F64:
    case StDtype::I64: return 8;
    case StDtype::U8:
    case StDtype::F8E4M3: return 1;
    default: return 0;
  }
}

size_t st_dtype_bytes(const std::string& name) {
  static const std::map<std::string, size_t, std::less<>> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  const auto it = sizes.find(name);
  return it == sizes.end() ? 0 : it->second;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---------------------------------------------------------------- one file

std::vector<TensorRef> parse_safetensors(const std::byte* base, size_t size,
                                         const std::string& file) {
  const std::string where = "plugin.weights file '" + file + "'";
  if (size < 8)
    bad(where + " is " + std::to_string(size) +
        " bytes long: too short for a safetensors file (truncated?)");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(base[i]);
  if (header_bytes > kMaxHeaderBytes)
    bad(where + ": header length " + std::to_string(header_bytes) +
        " is over the format's cap of " + std::to_string(kMaxHeaderBytes) +
        " bytes (not a safetensors file?)");
  if (header_bytes > size - 8)
    bad(where + ": header length " + std::to_string(header_bytes) + " runs past the file's " +
        std::to_string(size) + " bytes (truncated or not a safetensors file)");
  const std::string_view text(reinterpret_cast<const char*>(base + 8), header_bytes);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{')
    bad(where + ": the header is not a JSON object (not a safetensors file?)");
  const Json header = Json::parse(text, where + " header");
  const std::byte* data = base + 8 + header_bytes;
  const uint64_t data_bytes = size - 8 - header_bytes;
  std::vector<TensorRef> tensors;
  for (const auto& [name, entry] : header.as_object(where + " header")) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.as_object(where + ": __metadata__"))
        if (!v.is_string()) bad(where + ": __metadata__ entry '" + k + "' is not a string");
      continue;
    }
    tensors.push_back(parse_entry(name, entry, file, data, data_bytes));
  }
  std::vector<const TensorRef*> refs;
  for (const TensorRef& t : tensors) refs.push_back(&t);
  check_tiling(std::move(refs), data, data_bytes, file);
  return tensors;
}

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path.string()) {
  const ReadOnlyFile file(path, "plugin.weights file", kWeightsFix);
  map_bytes_ = static_cast<size_t>(file.size());
  if (map_bytes_ < 8)  // also keeps mmap from a zero length
    bad("plugin.weights file '" + path_ + "' is " + std::to_string(map_bytes_) +
        " bytes long: too short for a safetensors file (truncated?)");
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(EG_ERR_IO, "plugin.weights file '" + path_ + "': mmap failed: " + std::strerror(errno));
  }
  try {
    for (TensorRef& t : parse_safetensors(static_cast<const std::byte*>(map_), map_bytes_, path_)) {
      std::string name = t.name;
      tensors_.emplace(std::move(name), std::move(t));  // names are unique: the parser saw to it
    }
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

const TensorRef* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : tensors_) out.push_back(k);
  return out;
}

// ---------------------------------------------------------------- a store

std::unique_ptr<TensorStore> TensorStore::open(const fs::path& path) {
  std::unique_ptr<TensorStore> store(new TensorStore());
  const std::string head = "plugin.weights '" + path.string() + "'";
  fs::path index;
  fs::path single;
  switch (file_kind(path)) {
    case FileKind::Missing: bad(head + " does not exist: " + kWeightsFix);
    case FileKind::Other:
      bad(head + " is " + special_file_kind(path) + ", not a regular file: " + kWeightsFix);
    case FileKind::Directory: {
      // Present in any form counts: a FIFO named model.safetensors is refused, not skipped.
      if (file_kind(path / "model.safetensors.index.json") != FileKind::Missing) {
        index = path / "model.safetensors.index.json";
      } else if (file_kind(path / "model.safetensors") != FileKind::Missing) {
        single = path / "model.safetensors";
      } else {
        std::vector<fs::path> found;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(path, ec))
          if (e.path().extension() == ".safetensors") found.push_back(e.path());
        if (ec) bad(head + " cannot be listed: " + ec.message());
        if (found.size() != 1)
          bad(head +
              " is a directory with no model.safetensors.index.json, no "
              "model.safetensors and " +
              std::to_string(found.size()) +
              " other .safetensors files (expected one): name the checkpoint's file or index");
        single = found[0];
      }
      break;
    }
    case FileKind::Regular:
      if (path.extension() == ".json")
        index = path;
      else
        single = path;
      break;
  }

  if (!single.empty()) {
    store->single_ = std::make_unique<SafetensorsFile>(single);
    store->description_ = "plugin.weights file '" + single.string() + "'";
    return store;
  }
  const std::string where = "plugin.weights index '" + index.string() + "'";
  const std::string text = read_text_input(index, "plugin.weights index", kWeightsFix);
  const Json doc = Json::parse(text, where);
  if (!doc.is_object()) bad(where + " is not a JSON object");
  const Json* map = doc.find("weight_map");
  if (!map) bad(where + " has no \"weight_map\" object: not a safetensors index");
  for (const auto& [name, file] : map->as_object(where + ": weight_map")) {
    const std::string& shard = file.as_string(where + ": weight_map entry '" + name + "'");
    const std::string problem = relative_shard_problem(shard);
    if (!problem.empty())
      bad(where + ": weight_map entry '" + name + "' names shard '" + shard + "', which " +
          problem + "; shards live beside the index");
    store->weight_map_[name] = shard;
  }
  store->directory_ = index.parent_path();
  store->description_ = "sharded " + where;
  return store;
}

const SafetensorsFile& TensorStore::shard(const std::string& file) const {
  auto it = shards_.find(file);
  if (it == shards_.end())
    it = shards_.emplace(file, std::make_unique<SafetensorsFile>(directory_ / file)).first;
  return *it->second;
}

namespace {

// Trailing dotted components `a` and `b` share ("x.norm.weight" and
// "y.norm.weight": 2).
int shared_suffix(const std::string& a, const std::string& b) {
  int parts = 0;
  size_t i = a.size(), j = b.size();
  while (i > 0 && j > 0) {
    const size_t ia = a.rfind('.', i - 1), jb = b.rfind('.', j - 1);
    const size_t sa = ia == std::string::npos ? 0 : ia + 1,
                 sb = jb == std::string::npos ? 0 : jb + 1;
    if (a.compare(sa, i - sa, b, sb, j - sb) != 0) break;
    ++parts;
    if (sa == 0 || sb == 0) break;
    i = sa - 1;
    j = sb - 1;
  }
  return parts;
}

}  // namespace

std::string similar_tensor_names(const std::string& wanted, const std::vector<std::string>& names) {
  int best = 2;  // at least two components: a shared "weight" alone says nothing
  std::vector<std::string> found;
  for (const std::string& n : names) {
    const int s = shared_suffix(wanted, n);
    if (s < best) continue;
    if (s > best) {
      best = s;
      found.clear();
    }
    if (found.size() < 3) found.push_back(n);
  }
  if (found.empty()) return {};
  std::string text = " (it holds";
  for (size_t k = 0; k < found.size(); ++k) text += (k ? ", '" : " '") + found[k] + "'";
  return text + ": another name prefix? Check the plugin's weight_prefix key)";
}

bool TensorStore::contains(const std::string& name) const {
  if (single_) return single_->find(name) != nullptr;
  return weight_map_.count(name) != 0;
}

const TensorRef& TensorStore::get(const std::string& name) const {
  if (single_) {
    if (const TensorRef* t = single_->find(name)) return *t;
    bad("tensor '" + name + "' is missing from " + description_ +
        similar_tensor_names(name, single_->names()) +
        ": is it a checkpoint of this model, with this configuration?");
  }
  auto it = weight_map_.find(name);
  if (it == weight_map_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, file] : weight_map_) names.push_back(n);
    bad("tensor '" + name + "' is not in the weight_map of " + description_ +
        similar_tensor_names(name, names) +
        ": is it a checkpoint of this model, with this configuration?");
  }
  const SafetensorsFile& f = shard(it->second);
  if (const TensorRef* t = f.find(name)) return *t;
  bad("tensor '" + name + "' is missing from shard '" + f.path() + "' although " + description_ +
      " lists it there");
}

namespace {

// Bits of a non-finite value: all exponent bits set.
constexpr uint32_t kF32Exp = 0x7f800000u;
constexpr uint16_t kBf16Exp = 0x7f80u, kF16Exp = 0x7c00u;

// f16 -> f32 by bits (exact; no libm call, so the loop vectorises).
inline uint32_t f16_bits_to_f32_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 31) return sign | 0x7f800000u | (mant << 13);
  if (exp != 0) return sign | ((exp + 112) << 23) | (mant << 13);
  float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant x 2^-24, exact
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return sign | bits;
}

// Converts `count` elements into `out` and says whether any was NaN or
// infinite: one pass over the data.
bool convert(const TensorRef& t, size_t count, float* out) {
  const std::byte* src = t.data;
  uint32_t nonfinite = 0;
  switch (t.dtype) {
    case StDtype::F32:
      for (size_t i = 0; i < count; ++i) {
        uint32_t b;
        std::memcpy(&b, src + 4 * i, 4);
        nonfinite |= static_cast<uint32_t>((b & kF32Exp) == kF32Exp);
        std::memcpy(out + i, &b, 4);
      }
      break;
    case StDtype::BF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        nonfinite |= static_cast<uint32_t>((v & kBf16Exp) == kBf16Exp);
        const uint32_t b = static_cast<uint32_t>(v) << 16;
        std::memcpy(out + i, &b, 4);
      }
      break;
    case StDtype::F16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        nonfinite |= static_cast<uint32_t>((v & kF16Exp) == kF16Exp);
        const uint32_t b = f16_bits_to_f32_bits(v);
        std::memcpy(out + i, &b, 4);
      }
      break;
    default:
      fail(EG_ERR_INVALID_ARGUMENT, "tensor '" + t.name + "' in plugin.weights file '" + t.file +
                                        "' has dtype " + t.dtype_name +
                                        "; weights must be F32, BF16 or F16, or F8_E4M3 with "
                                        "their scale beside them");
  }
  return nonfinite != 0;
}

}  // namespace

namespace {

void require_shape(const TensorRef& t, const std::vector<int64_t>& expected) {
  if (t.shape != expected)
    bad("tensor '" + t.name + "' in plugin.weights file '" + t.file + "' has shape " +
        shape_string(t.shape) + ", expected " + shape_string(expected) +
        " for this model configuration");
}

// Names the first NaN or infinity of `out` (read from t), if any.
void require_finite(const TensorRef& t, const std::vector<float>& out) {
  const auto first =
      std::find_if(out.begin(), out.end(), [](float v) { return !std::isfinite(v); });
  if (first == out.end()) return;
  const float v = *first;
  bad("tensor '" + t.name + "' in plugin.weights file '" + t.file + "' holds " +
      (std::isnan(v) ? "NaN"
       : v > 0       ? "+Inf"
                     : "-Inf") +
      " at element " + std::to_string(first - out.begin()) + " of " + std::to_string(out.size()) +
      ": the checkpoint is damaged (re-download or re-convert it), or set [plugin.config] "
      "check_finite = false to load it anyway");
}

}  // namespace

std::vector<float> read_as_f32(const TensorRef& t, const std::vector<int64_t>& expected,
                               bool check_finite) {
  require_shape(t, expected);
  // The shapes match, and the header's shape x dtype was checked against its span.
  const size_t count = t.bytes / st_dtype_bytes(t.dtype_name);
  std::vector<float> out(count);
  if (convert(t, count, out.data()) && check_finite) require_finite(t, out);
  return out;
}

std::vector<float> read_e4m3_as_f32(const TensorRef& t, const TensorRef& scale,
                                    const std::vector<int64_t>& expected, bool check_finite) {
  require_shape(t, expected);
  if (t.dtype != StDtype::F8E4M3)
    bad("tensor '" + t.name + "' in plugin.weights file '" + t.file + "' has dtype " +
        t.dtype_name + ", not F8_E4M3");
  const std::vector<float> scales = read_as_f32(scale, scale.shape, check_finite);
  const size_t count = t.bytes;
  const int64_t rows = expected.empty() ? 1 : expected.front();
  const bool per_row =
      static_cast<int64_t>(scales.size()) == rows && rows > 1 &&
      (scale.shape.size() == 1 || (scale.shape.size() == 2 && scale.shape[1] == 1));
  if (scales.size() != 1 && !per_row)
    bad("tensor '" + scale.name + "' in plugin.weights file '" + scale.file + "' has shape " +
        shape_string(scale.shape) + ": the scale of '" + t.name + "' " + shape_string(t.shape) +
        " must hold one value (per tensor) or one per row ([" + std::to_string(rows) + "] or [" +
        std::to_string(rows) + ", 1])");
  const size_t row_len = rows > 0 ? count / static_cast<size_t>(rows) : count;
  std::vector<float> out(count);
  const auto* codes = reinterpret_cast<const uint8_t*>(t.data);
  for (size_t i = 0; i < count; ++i)
    out[i] = e4m3_to_f32(codes[i]) * scales[per_row ? i / row_len : 0];
  if (check_finite) require_finite(t, out);
  return out;
}

// ---------------------------------------------------------------- writing

TensorToWrite f32_tensor(const std::string& name, const std::vector<int64_t>& shape,
                         const std::vector<float>& values) {
  TensorToWrite t{name, StDtype::F32, shape, std::vector<std::byte>(values.size() * 4)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TensorToWrite bf16_tensor(const std::string& name, const std::vector<int64_t>& shape,
                          const std::vector<float>& values) {
  TensorToWrite t{name, StDtype::BF16, shape, std::vector<std::byte>(values.size() * 2)};
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t v = f32_to_bf16(values[i]);
    std::memcpy(t.bytes.data() + 2 * i, &v, 2);
  }
  return t;
}

void write_safetensors(const fs::path& path, const std::vector<TensorToWrite>& tensors) {
  std::string header = "{";
  size_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    if (i) header += ',';
    header += '"';
    header += t.name;
    header += "\":{\"dtype\":\"";
    header += st_dtype_name(t.dtype);
    header += "\",\"shape\":";
    header += shape_string(t.shape);
    header += ",\"data_offsets\":[";
    header += std::to_string(offset);
    header += ',';
    header += std::to_string(offset + t.bytes.size());
    header += "]}";
    offset += t.bytes.size();
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(EG_ERR_IO, "cannot write '" + path.string() + "': " + std::strerror(errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const TensorToWrite& t : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
  if (!out) fail(EG_ERR_IO, "writing '" + path.string() + "' failed");
}

}  // namespace encoder_kit
