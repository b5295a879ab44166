// The safetensors header reader (plugins/common/src/safetensors.cpp): the
// input is a whole file (8-byte header length, JSON header, data section),
// parsed by egk::parse_safetensors as SafetensorsFile parses a mapped file;
// then every tensor is read back as f32 at its own shape, so an extent that
// passed the checks but lies outside the input shows as an ASan report.
#include <egk/error.hpp>
#include <egk/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes: a read past the end hits ASan's redzone.
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + size);
  try {
    for (const egk::TensorRef& t : egk::parse_safetensors(bytes.data(), bytes.size(), "fuzz")) {
      try {
        (void)egk::read_as_f32(t, t.shape);
      } catch (const egk::Error&) {  // a dtype weights are not read from, NaN, ...
      }
    }
  } catch (const egk::Error&) {
  }
  return 0;
}
