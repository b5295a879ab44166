#include "safetensors.hpp"

#include <encgraph/plugin_api.h>
#include <encgraph/error.hpp>

#include <nlohmann/json.hpp>

#include <system_error>

namespace encgraph::host {
namespace {

[[noreturn]] void io_error(const std::filesystem::path& p, const std::string& what) {
  throw Error(ErrorKind::Input, "embeddings file '" + p.string() + "': " + what);
}

std::filesystem::path with_suffix(const std::filesystem::path& p, const char* suffix) {
  std::filesystem::path out = p;
  out += suffix;
  return out;
}

}  // namespace

const char* safetensors_dtype(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32: return "F32";
    case EG_DTYPE_F16: return "F16";
    case EG_DTYPE_BF16: return "BF16";
    case EG_DTYPE_F64: return "F64";
    case EG_DTYPE_I32: return "I32";
    case EG_DTYPE_I64: return "I64";
    case EG_DTYPE_U8: return "U8";
    default:
      throw Error(ErrorKind::Internal,
                  "no safetensors dtype for eg_dtype " + std::to_string(dtype));
  }
}

size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32:
    case EG_DTYPE_I32: return 4;
    case EG_DTYPE_F16:
    case EG_DTYPE_BF16: return 2;
    case EG_DTYPE_F64:
    case EG_DTYPE_I64: return 8;
    case EG_DTYPE_U8: return 1;
    default: throw Error(ErrorKind::Internal, "unknown eg_dtype " + std::to_string(dtype));
  }
}

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)),
      staging_(with_suffix(path_, ".data.partial")),
      metadata_(std::move(metadata)) {
  if (path_.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path_.parent_path(), ec);
  }
  data_.open(staging_, std::ios::binary | std::ios::trunc);
  if (!data_) io_error(path_, "cannot create '" + staging_.string() + "'");
}

SafetensorsWriter::~SafetensorsWriter() {
  if (finished_) return;
  data_.close();
  std::error_code ec;
  std::filesystem::remove(staging_, ec);
  std::filesystem::remove(with_suffix(path_, ".partial"), ec);
}

void SafetensorsWriter::add(const std::string& name, int32_t dtype,
                            const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  if (finished_) throw Error(ErrorKind::Internal, "safetensors: add after finish");
  if (name == "__metadata__" || names_.count(name))
    throw Error(ErrorKind::Internal,
                "safetensors: tensor name '" + name + "' is reserved or repeated");
  size_t expected = dtype_bytes(dtype);
  for (int64_t d : shape) {
    if (d < 0) throw Error(ErrorKind::Internal, "safetensors: negative extent in '" + name + "'");
    expected *= static_cast<size_t>(d);
  }
  if (bytes != expected)
    throw Error(ErrorKind::Internal, "safetensors: tensor '" + name + "' has " +
                                         std::to_string(bytes) + " bytes, its shape needs " +
                                         std::to_string(expected));
  data_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!data_) io_error(path_, "write failed (disk full?)");
  names_[name] = tensors_.size();
  tensors_.push_back({name, dtype, shape, offset_, offset_ + bytes});
  offset_ += bytes;
}

void SafetensorsWriter::finish() {
  if (finished_) return;
  data_.close();
  if (!data_) io_error(path_, "closing the staging file failed");
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  for (const auto& t : tensors_)
    header[t.name] = {{"dtype", safetensors_dtype(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {t.begin, t.end}}};
  std::string text = header.dump();
  // Data starting 8-byte aligned lets readers map tensors in place.
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::filesystem::path partial = with_suffix(path_, ".partial");
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) io_error(path_, "cannot create '" + partial.string() + "'");
    unsigned char len[8];
    for (int i = 0; i < 8; ++i)
      len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::ifstream in(staging_, std::ios::binary);
    if (offset_ > 0) out << in.rdbuf();
    out.close();
    if (!out) io_error(path_, "write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(partial, path_, ec);
  if (ec) io_error(path_, "cannot be renamed into place: " + ec.message());
  std::filesystem::remove(staging_, ec);
  finished_ = true;
}

}  // namespace encgraph::host
