// A small, strict JSON reader for the files plugins meet: safetensors headers,
// their shard index, and Hugging Face config.json. Objects keep insertion
// order. Refused with the line, column and byte: invalid UTF-8, control
// characters and unpaired surrogates in strings, bad escapes, numbers outside
// JSON's grammar or the double range, duplicate keys, nesting deeper than
// kMaxDepth, more than kMaxValues values, and anything after the value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace encoder_kit {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  // Real files nest a few levels; the limit keeps recursion off the stack's end.
  static constexpr int kMaxDepth = 64;
  // A value costs ~100 bytes parsed: this bounds a hostile header's memory.
  static constexpr int64_t kMaxValues = int64_t{1} << 20;

  Json() = default;
  // `where` begins every error ("config_json 'x.json'").
  static Json parse(std::string_view text, const std::string& where);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Accessors throw encoder_kit::Error (INVALID_ARGUMENT) naming `what` on a type mismatch.
  bool as_bool(const std::string& what) const;
  double as_double(const std::string& what) const;
  // An integral number within int64 (4.0 counts; 1e300 and 0.5 do not).
  int64_t as_int(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  const std::vector<Json>& as_array(const std::string& what) const;
  const std::vector<std::pair<std::string, Json>>& as_object(const std::string& what) const;

  // Object member or nullptr.
  const Json* find(std::string_view key) const;

 private:
  friend class JsonParser;
  Type type_ = Type::Null;
  bool bool_ = false;
  double number_ = 0.0;
  bool integral_ = false;
  int64_t integer_ = 0;
  std::string string_;  // a string's value; a number's text, for messages
  std::vector<Json> array_;
  std::vector<std::pair<std::string, Json>> object_;
};

}  // namespace encoder_kit
