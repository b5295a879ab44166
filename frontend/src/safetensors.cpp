#include "safetensors.hpp"

#include "input_files.hpp"
#include "toml_util.hpp"

#include <encgraph/plugin_api.h>
#include <encgraph/error.hpp>

#include <nlohmann/json.hpp>

namespace encgraph::host {

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
      metadata_(std::move(metadata)),
      data_(std::make_unique<StagedFile>(path_, "embeddings file")) {}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::add(const std::string& name, int32_t dtype,
                            const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  if (finished_) throw Error(ErrorKind::Internal, "safetensors: add after finish");
  if (name == "__metadata__" || names_.count(name))
    throw Error(ErrorKind::Internal,
                "safetensors: tensor name '" + printable(name) + "' is reserved or repeated");
  // The header is JSON: a name that is not UTF-8 could not be written at the end.
  if (!is_valid_utf8(name))
    throw Error(ErrorKind::Input,
                "safetensors: tensor name '" + printable(name) + "' is not valid UTF-8");
  size_t expected = dtype_bytes(dtype);
  for (int64_t d : shape) {
    if (d < 0) throw Error(ErrorKind::Internal, "safetensors: negative extent in '" + name + "'");
    expected *= static_cast<size_t>(d);
  }
  if (bytes != expected)
    throw Error(ErrorKind::Internal, "safetensors: tensor '" + name + "' has " +
                                         std::to_string(bytes) + " bytes, its shape needs " +
                                         std::to_string(expected));
  data_->write(data, bytes);
  names_[name] = tensors_.size();
  tensors_.push_back({name, dtype, shape, offset_, offset_ + bytes});
  offset_ += bytes;
}

void SafetensorsWriter::finish() {
  if (finished_) return;
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  for (const auto& t : tensors_)
    header[t.name] = {{"dtype", safetensors_dtype(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {t.begin, t.end}}};
  std::string text = header.dump();
  // Data starting 8-byte aligned lets readers map tensors in place.
  text.append((8 - text.size() % 8) % 8, ' ');

  StagedFile out(path_, "embeddings file");
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(len, 8);
  out.write(text.data(), text.size());
  out.append(*data_, offset_);
  out.commit();
  data_->discard();
  finished_ = true;
}

}  // namespace encgraph::host
