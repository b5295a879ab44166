#include <egk/error.hpp>
#include <egk/json.hpp>
#include <egk/numeric.hpp>
#include <egk/safetensors.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace egk {
namespace fs = std::filesystem;

namespace {

// A header larger than this is not a safetensors file (the format caps it at 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

StDtype parse_dtype(const std::string& s) {
  if (s == "F32") return StDtype::F32;
  if (s == "F16") return StDtype::F16;
  if (s == "BF16") return StDtype::BF16;
  if (s == "F64") return StDtype::F64;
  if (s == "I32") return StDtype::I32;
  if (s == "I64") return StDtype::I64;
  if (s == "U8") return StDtype::U8;
  return StDtype::Other;
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(EG_ERR_NOT_FOUND, "cannot open '" + path.string() + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
    case StDtype::U8: return 1;
    default: return 0;
  }
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---------------------------------------------------------------- one file

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path.string()) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(errno == ENOENT ? EG_ERR_NOT_FOUND : EG_ERR_IO,
         "weights file '" + path_ + "': cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail(EG_ERR_IO, "weights file '" + path_ + "': cannot stat: " + std::strerror(e));
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ < 8) {
    ::close(fd);
    fail(EG_ERR_IO, "weights file '" + path_ + "' is " + std::to_string(map_bytes_) +
                        " bytes long: too short for a safetensors header (truncated?)");
  }
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(EG_ERR_IO, "weights file '" + path_ + "': mmap failed: " + std::strerror(map_errno));
  }
  try {
    const auto* base = static_cast<const std::byte*>(map_);
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(base[i]);
    if (header_bytes > kMaxHeaderBytes || header_bytes > map_bytes_ - 8)
      fail(EG_ERR_IO, "weights file '" + path_ + "': header of " + std::to_string(header_bytes) +
                          " bytes does not fit in the file's " + std::to_string(map_bytes_) +
                          " bytes (truncated or not a safetensors file)");
    const std::string_view text(reinterpret_cast<const char*>(base + 8), header_bytes);
    const Json header = Json::parse(text, "weights file '" + path_ + "' header");
    const std::byte* data = base + 8 + header_bytes;
    const size_t data_bytes = map_bytes_ - 8 - header_bytes;
    for (const auto& [name, entry] :
         header.as_object("the safetensors header of '" + path_ + "'")) {
      if (name == "__metadata__") continue;
      const std::string what = "weights file '" + path_ + "': tensor '" + name + "'";
      TensorRef t;
      t.name = name;
      t.file = path_;
      const Json* dtype = entry.find("dtype");
      const Json* shape = entry.find("shape");
      const Json* offsets = entry.find("data_offsets");
      if (!dtype || !shape || !offsets)
        fail(EG_ERR_IO, what + ": header entry lacks dtype, shape or data_offsets");
      t.dtype_name = dtype->as_string(what + " dtype");
      t.dtype = parse_dtype(t.dtype_name);
      size_t count = 1;
      for (const Json& d : shape->as_array(what + " shape")) {
        const int64_t extent = d.as_int(what + " shape entry");
        if (extent < 0) fail(EG_ERR_IO, what + ": negative extent in its shape");
        t.shape.push_back(extent);
        count *= static_cast<size_t>(extent);
      }
      const auto& off = offsets->as_array(what + " data_offsets");
      if (off.size() != 2) fail(EG_ERR_IO, what + ": data_offsets must have two entries");
      const int64_t begin = off[0].as_int(what + " data_offsets"),
                    end = off[1].as_int(what + " data_offsets");
      if (begin < 0 || end < begin)
        fail(EG_ERR_IO, what + ": bad data_offsets [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ")");
      if (static_cast<uint64_t>(end) > data_bytes)
        fail(EG_ERR_IO, what + " needs bytes [" + std::to_string(begin) + ", " +
                            std::to_string(end) +
                            ") of the data section, but the file holds only " +
                            std::to_string(data_bytes) + " (truncated file?)");
      t.bytes = static_cast<size_t>(end - begin);
      const size_t elem = st_dtype_bytes(t.dtype);
      if (elem && t.bytes != count * elem)
        fail(EG_ERR_IO, what + ": " + std::to_string(t.bytes) + " bytes do not match shape " +
                            shape_string(t.shape) + " of " + t.dtype_name);
      t.data = data + begin;
      tensors_.emplace(name, std::move(t));
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
  std::error_code ec;
  fs::path index;
  fs::path single;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "model.safetensors.index.json")) {
      index = path / "model.safetensors.index.json";
    } else if (fs::exists(path / "model.safetensors")) {
      single = path / "model.safetensors";
    } else {
      std::vector<fs::path> found;
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.path().extension() == ".safetensors") found.push_back(e.path());
      if (found.size() != 1)
        fail(EG_ERR_NOT_FOUND, "weights directory '" + path.string() +
                                   "' has no model.safetensors.index.json, no "
                                   "model.safetensors and " +
                                   std::to_string(found.size()) +
                                   " other .safetensors files (expected one)");
      single = found[0];
    }
  } else if (path.extension() == ".json") {
    index = path;
  } else {
    single = path;
  }

  if (!single.empty()) {
    store->single_ = std::make_unique<SafetensorsFile>(single);
    store->description_ = "weights file '" + single.string() + "'";
    return store;
  }
  const std::string text = read_text_file(index);
  const Json doc = Json::parse(text, "weights index '" + index.string() + "'");
  const Json* map = doc.find("weight_map");
  if (!map) fail(EG_ERR_IO, "weights index '" + index.string() + "' has no \"weight_map\" object");
  for (const auto& [name, file] : map->as_object("weight_map of '" + index.string() + "'"))
    store->weight_map_[name] = file.as_string("weight_map entry '" + name + "'");
  store->directory_ = index.parent_path();
  store->description_ = "sharded weights '" + index.string() + "'";
  return store;
}

const SafetensorsFile& TensorStore::shard(const std::string& file) const {
  auto it = shards_.find(file);
  if (it == shards_.end())
    it = shards_.emplace(file, std::make_unique<SafetensorsFile>(directory_ / file)).first;
  return *it->second;
}

bool TensorStore::contains(const std::string& name) const {
  if (single_) return single_->find(name) != nullptr;
  return weight_map_.count(name) != 0;
}

const TensorRef& TensorStore::get(const std::string& name) const {
  if (single_) {
    if (const TensorRef* t = single_->find(name)) return *t;
    fail(EG_ERR_NOT_FOUND, "tensor '" + name + "' is missing from " + description_);
  }
  auto it = weight_map_.find(name);
  if (it == weight_map_.end())
    fail(EG_ERR_NOT_FOUND, "tensor '" + name + "' is not in the weight_map of " + description_);
  const SafetensorsFile& f = shard(it->second);
  if (const TensorRef* t = f.find(name)) return *t;
  fail(EG_ERR_NOT_FOUND, "tensor '" + name + "' is missing from shard '" + f.path() +
                             "' although " + description_ + " lists it there");
}

std::vector<float> read_as_f32(const TensorRef& t, const std::vector<int64_t>& expected) {
  if (t.shape != expected)
    fail(EG_ERR_INVALID_ARGUMENT, "tensor '" + t.name + "' in '" + t.file + "' has shape " +
                                      shape_string(t.shape) + ", expected " +
                                      shape_string(expected) + " for this model configuration");
  size_t count = 1;
  for (int64_t d : expected) count *= static_cast<size_t>(d);
  std::vector<float> out(count);
  switch (t.dtype) {
    case StDtype::F32: std::memcpy(out.data(), t.data, count * 4); break;
    case StDtype::BF16:
    case StDtype::F16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, t.data + 2 * i, 2);
        out[i] = t.dtype == StDtype::BF16 ? bf16_to_f32(v) : f16_to_f32(v);
      }
      break;
    default:
      fail(EG_ERR_UNSUPPORTED, "tensor '" + t.name + "' in '" + t.file + "' has dtype " +
                                   t.dtype_name + "; weights must be F32, BF16 or F16");
  }
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

}  // namespace egk
