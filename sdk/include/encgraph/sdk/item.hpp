// Size-safe access to the structs the runtime passes without a struct_size of
// their own (eg_item_desc in, eg_item_spec out): their sizes come from the host
// (eg_host_struct_size), so a plugin built against a newer header never reads
// or writes past what this runtime allocated.
#pragma once

#include <encgraph/sdk/host.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace encgraph::sdk {

// What item_spec reports. path_tokens[p] counts path p's declared unit; a 1.1
// plugin writes it for every path, one path included.
struct ItemSpec {
  int64_t input_size = 0;     // work in the plugin's own unit (balances data-parallel ranks)
  int64_t output_tokens = 0;  // rows of the primary output
  int64_t frames = 1;         // 1 for an image
  std::array<int64_t, EG_MAX_PATHS> path_tokens{};
};

// Writes `spec` into `out`, at most `host_size` bytes (the runtime's eg_item_spec).
inline void write_item_spec(eg_item_spec* out, const ItemSpec& spec,
                            size_t host_size = host().item_spec_size()) noexcept {
  if (!out) return;
  eg_item_spec full{};
  full.input_size = spec.input_size;
  full.output_tokens = spec.output_tokens;
  full.frames = spec.frames;
  for (int p = 0; p < EG_MAX_PATHS; ++p) full.path_tokens[p] = spec.path_tokens[p];
  std::memcpy(out, &full, std::min(sizeof(full), host_size));
}

// A copy of the runtime's eg_item_desc: the bytes it has (`host_size`), zeros
// past them, so fields a newer header adds read as 0 from an older runtime.
inline eg_item_desc read_item_desc(const eg_item_desc* desc,
                                   size_t host_size = host().item_desc_size()) noexcept {
  eg_item_desc copy{};
  if (desc) std::memcpy(&copy, desc, std::min(sizeof(copy), host_size));
  return copy;
}

}  // namespace encgraph::sdk
