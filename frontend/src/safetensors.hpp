// A streaming safetensors writer: tensors are appended one by one (their bytes
// go to a staging file, so a long run never holds every embedding in memory);
// finish() writes the header and the bytes into a second staging file and
// renames it into place (output_files.hpp), so a failed or interrupted run
// leaves no half file and the old file, if any, stays as it was.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON (each tensor's
// dtype, shape and data_offsets, plus string metadata), padded with spaces to a
// multiple of 8, then the tensors' bytes back to back.
#pragma once

#include "output_files.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace encgraph::host {

// "F32", "BF16", ... as safetensors spells eg_dtype values.
const char* safetensors_dtype(int32_t dtype);
size_t dtype_bytes(int32_t dtype);

class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::map<std::string, std::string> metadata);
  ~SafetensorsWriter();  // removes the staging files; the target is untouched unless finish() ran
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends a tensor; `bytes` must match dtype and shape; names are unique,
  // UTF-8 and not "__metadata__".
  void add(const std::string& name, int32_t dtype, const std::vector<int64_t>& shape,
           const void* data, size_t bytes);
  size_t size() const { return tensors_.size(); }
  void finish();

 private:
  struct Entry {
    std::string name;
    int32_t dtype;
    std::vector<int64_t> shape;
    size_t begin, end;
  };
  std::filesystem::path path_;
  std::map<std::string, std::string> metadata_;
  std::vector<Entry> tensors_;
  std::map<std::string, size_t> names_;
  std::unique_ptr<StagedFile> data_;  // the tensors' bytes, until finish()
  size_t offset_ = 0;
  bool finished_ = false;
};

}  // namespace encgraph::host
