// The JSONL trace reader (host/src/trace.cpp): the input is a trace, parsed by
// parse_trace with an empty scratch folder as the trace's folder, so relative
// 'file' and 'frames_files' entries name nothing. Inputs with 'frames_glob'
// are skipped: an absolute pattern such as "/*/*/*" walks the whole machine,
// which is slow, not wrong, and would make runs neither bounded nor repeatable.
#include "workload.hpp"

#include <encgraph/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace {

std::filesystem::path scratch() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "encgraph-fuzz-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) std::abort();
  return tmpl;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path base = scratch();
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find("glob") != std::string::npos) return 0;
  std::istringstream in(text);
  try {
    std::vector<encgraph::host::WorkItem> items =
        encgraph::host::parse_trace(in, "fuzz.jsonl", base);
    encgraph::host::make_ids_unique(items);
  } catch (const encgraph::Error&) {
  }
  return 0;
}
