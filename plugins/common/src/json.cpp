#include <egk/error.hpp>
#include <egk/json.hpp>

#include <cerrno>
#include <cstdlib>

namespace egk {

class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  Json document() {
    Json v = value(0);
    skip_space();
    if (pos_ != s_.size()) error("trailing characters after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void error(const std::string& what) const {
    fail(EG_ERR_INVALID_ARGUMENT,
         where_ + ": invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) error("unexpected token");
    pos_ += w.size();
  }

  Json value(int depth) {
    if (depth > kMaxDepth) error("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) error("unexpected end of text");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.type_ = Json::Type::Object;
      if (consume('}')) return v;
      do {
        skip_space();
        std::string key = string();
        if (!consume(':')) error("expected ':' after an object key");
        v.object_.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      if (!consume('}')) error("expected ',' or '}' in an object");
    } else if (c == '[') {
      ++pos_;
      v.type_ = Json::Type::Array;
      if (consume(']')) return v;
      do v.array_.push_back(value(depth + 1));
      while (consume(','));
      if (!consume(']')) error("expected ',' or ']' in an array");
    } else if (c == '"') {
      v.type_ = Json::Type::String;
      v.string_ = string();
    } else if (c == 't') {
      expect_word("true");
      v.type_ = Json::Type::Bool;
      v.bool_ = true;
    } else if (c == 'f') {
      expect_word("false");
      v.type_ = Json::Type::Bool;
    } else if (c == 'n') {
      expect_word("null");
    } else {
      number(v);
    }
    return v;
  }

  void number(Json& v) {
    const size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    bool integral = true;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integral = false;
        ++pos_;
      } else {
        break;
      }
    }
    const std::string token(s_.substr(start, pos_ - start));
    if (token.empty() || token == "-") error("expected a value");
    char* end = nullptr;
    v.type_ = Json::Type::Number;
    v.number_ = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) error("malformed number '" + token + "'");
    if (integral) {
      errno = 0;
      const long long i = std::strtoll(token.c_str(), &end, 10);
      if (errno == 0) {
        v.integral_ = true;
        v.integer_ = i;
      }
    } else if (v.number_ == static_cast<double>(static_cast<int64_t>(v.number_))) {
      v.integral_ = true;  // 4.0 is a fine integer
      v.integer_ = static_cast<int64_t>(v.number_);
    }
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        error("bad \\u escape");
    }
    return v;
  }

  std::string string() {
    if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            const uint32_t lo = hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: error(std::string("unknown escape \\") + e);
      }
    }
    return out;
  }

  std::string_view s_;
  std::string where_;
  size_t pos_ = 0;
};

Json Json::parse(std::string_view text, const std::string& where) {
  return JsonParser(text, where).document();
}

namespace {
[[noreturn]] void type_error(const std::string& what, const char* expected) {
  fail(EG_ERR_INVALID_ARGUMENT, what + " must be " + expected);
}
}  // namespace

bool Json::as_bool(const std::string& what) const {
  if (type_ != Type::Bool) type_error(what, "true or false");
  return bool_;
}
double Json::as_double(const std::string& what) const {
  if (type_ != Type::Number) type_error(what, "a number");
  return number_;
}
int64_t Json::as_int(const std::string& what) const {
  if (type_ != Type::Number || !integral_) type_error(what, "an integer");
  return integer_;
}
const std::string& Json::as_string(const std::string& what) const {
  if (type_ != Type::String) type_error(what, "a string");
  return string_;
}
const std::vector<Json>& Json::as_array(const std::string& what) const {
  if (type_ != Type::Array) type_error(what, "an array");
  return array_;
}
const std::vector<std::pair<std::string, Json>>& Json::as_object(const std::string& what) const {
  if (type_ != Type::Object) type_error(what, "an object");
  return object_;
}
const Json* Json::find(std::string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto& [k, v] : object_)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace egk
