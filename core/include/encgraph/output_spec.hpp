// One named output of a plugin's forward, as the runtime reports it (a 1.0
// plugin has one, "embeddings").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace encgraph {

struct OutputSpec {
  std::string name;
  int64_t width = 0;          // columns of each row
  int32_t dtype = 0;          // eg_dtype
  int64_t rows_per_item = 0;  // 0: the item's output_tokens; > 0: fixed for every item
};

// Bytes per element of an eg_dtype (0 for an unknown one).
size_t dtype_size(int32_t dtype);
// "f32", "bf16", "i64", ... ("unknown" for an unknown eg_dtype): the names the
// CLI, reports and error messages use.
const char* dtype_name(int32_t dtype);

}  // namespace encgraph
