// The safetensors header reader (plugins/encoder_kit/src/safetensors.cpp): the
// input is a whole file (8-byte header length, JSON header, data section),
// parsed by encoder_kit::parse_safetensors as SafetensorsFile parses a mapped file;
// then every tensor is read back as f32 at its own shape, so an extent that
// passed the checks but lies outside the input shows as an ASan report.
#include <encoder_kit/error.hpp>
#include <encoder_kit/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes: a read past the end hits ASan's redzone.
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + size);
  try {
    for (const encoder_kit::TensorRef& t :
         encoder_kit::parse_safetensors(bytes.data(), bytes.size(), "fuzz")) {
      try {
        (void)encoder_kit::read_as_f32(t, t.shape);
      } catch (const encoder_kit::Error&) {  // a dtype weights are not read from, NaN, ...
      }
    }
  } catch (const encoder_kit::Error&) {
  }
  return 0;
}
