// The host's configuration (frontend/src/config.cpp): TOML text plus `--set`
// overrides through load_config_text, as `encgraph run --config f --set k=v`
// reads them. Input layout: the TOML text up to the first NUL byte, then one
// override per NUL-separated piece (the corpus files show it).
#include "config.hpp"

#include <encgraph/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find('\0');
  const std::string_view text = input.substr(0, cut);
  std::vector<std::string> overrides;
  if (cut != std::string_view::npos) {
    std::string_view rest = input.substr(cut + 1);
    while (true) {
      const size_t next = rest.find('\0');
      overrides.emplace_back(rest.substr(0, next));
      if (next == std::string_view::npos) break;
      rest = rest.substr(next + 1);
    }
  }
  try {
    const encgraph::host::HostConfig c =
        encgraph::host::load_config_text(text, "fuzz.toml", overrides);
    (void)encgraph::host::canonical_config(c);
  } catch (const encgraph::Error&) {
  }
  return 0;
}
