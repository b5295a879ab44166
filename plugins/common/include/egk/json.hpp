// A small JSON reader for the files plugins meet: safetensors headers, their
// shard index, and Hugging Face config.json. Objects keep insertion order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace egk {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Json() = default;
  static Json parse(std::string_view text, const std::string& where);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Accessors throw egk::Error (INVALID_ARGUMENT) naming `what` on a type mismatch.
  bool as_bool(const std::string& what) const;
  double as_double(const std::string& what) const;
  int64_t as_int(const std::string& what) const;  // an integral number
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
  std::string string_;
  std::vector<Json> array_;
  std::vector<std::pair<std::string, Json>> object_;
};

}  // namespace egk
