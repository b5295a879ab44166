// encoder_kit::Json (plugins/encoder_kit/src/json.cpp): the reader of safetensors headers,
// shard indexes and config.json. The input is the text; every value is then
// read through each accessor, as the plugins do (as_int on 1e300 must be an
// error, not a cast).
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>

#include <cstdint>
#include <string_view>

namespace {

void visit(const encoder_kit::Json& j, int depth) {
  if (depth > 64) return;  // the walk, not the parser, would recurse without bound
  const std::string what = "value";
  try {
    switch (j.type()) {
      case encoder_kit::Json::Type::Null: break;
      case encoder_kit::Json::Type::Bool: (void)j.as_bool(what); break;
      case encoder_kit::Json::Type::Number:
        (void)j.as_double(what);
        try {
          (void)j.as_int(what);
        } catch (const encoder_kit::Error&) {
        }
        break;
      case encoder_kit::Json::Type::String: (void)j.as_string(what).size(); break;
      case encoder_kit::Json::Type::Array:
        for (const encoder_kit::Json& v : j.as_array(what)) visit(v, depth + 1);
        break;
      case encoder_kit::Json::Type::Object:
        for (const auto& [key, v] : j.as_object(what)) {
          if (j.find(key) == nullptr) __builtin_trap();  // a member must be found by its key
          visit(v, depth + 1);
        }
        break;
    }
    (void)j.as_string(what);  // the wrong accessor must throw, never crash
  } catch (const encoder_kit::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    visit(encoder_kit::Json::parse(text, "fuzz input"), 0);
  } catch (const encoder_kit::Error&) {
  }
  return 0;
}
