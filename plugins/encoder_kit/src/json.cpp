#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <vector>

namespace encoder_kit {

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
  [[noreturn]] void error_at(size_t at, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    fail(EG_ERR_INVALID_ARGUMENT, where_ + ": invalid JSON at line " + std::to_string(line) +
                                      ", column " + std::to_string(column) + " (byte " +
                                      std::to_string(at) + "): " + what);
  }
  [[noreturn]] void error(const std::string& what) const { error_at(pos_, what); }

  // The byte at pos_ for a message: 'x' when printable, else its hex code.
  std::string here() const {
    if (pos_ >= s_.size()) return "the end of the text";
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x21 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
  }

  bool at_digit() const { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; }

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
    if (s_.substr(pos_, w.size()) != w) error("unexpected " + here() + ": expected a value");
    pos_ += w.size();
  }

  Json value(int depth) {
    if (depth > Json::kMaxDepth)
      error("nested deeper than " + std::to_string(Json::kMaxDepth) + " levels");
    if (++values_ > Json::kMaxValues)
      error("more than " + std::to_string(Json::kMaxValues) + " values");
    skip_space();
    if (pos_ >= s_.size()) error("unexpected end of text: expected a value");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      const size_t start = pos_++;
      v.type_ = Json::Type::Object;
      if (consume('}')) return v;
      do {
        skip_space();
        std::string key = string();
        if (!consume(':')) error("expected ':' after an object key, found " + here());
        v.object_.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      if (!consume('}')) error("expected ',' or '}' in an object, found " + here());
      reject_duplicate_keys(v, start);
    } else if (c == '[') {
      ++pos_;
      v.type_ = Json::Type::Array;
      if (consume(']')) return v;
      do v.array_.push_back(value(depth + 1));
      while (consume(','));
      if (!consume(']')) error("expected ',' or ']' in an array, found " + here());
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
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number(v);
    } else {
      error("unexpected " + here() + ": expected a value");
    }
    return v;
  }

  // Sorting views finds a repeat in n log n: headers hold thousands of keys.
  void reject_duplicate_keys(const Json& v, size_t start) const {
    if (v.object_.size() < 2) return;
    std::vector<std::string_view> keys;
    keys.reserve(v.object_.size());
    for (const auto& [k, _] : v.object_) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    const auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end())
      error_at(start, "the object starting here has the key \"" + std::string(*dup) + "\" twice");
  }

  // JSON's grammar exactly: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  void number(Json& v) {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    if (!at_digit()) error("a digit must follow '-', found " + here());
    if (s_[pos_] == '0') {
      ++pos_;
      if (at_digit()) error("a number may not have leading zeros");
    } else {
      while (at_digit()) ++pos_;
    }
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (!at_digit()) error("a digit must follow the decimal point, found " + here());
      while (at_digit()) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!at_digit()) error("a digit must follow the exponent, found " + here());
      while (at_digit()) ++pos_;
    }
    const std::string_view token = s_.substr(start, pos_ - start);
    v.type_ = Json::Type::Number;
    v.string_ = std::string(token);
    // from_chars: the C locale's reading whatever the process's locale is.
    const auto r = std::from_chars(token.data(), token.data() + token.size(), v.number_);
    if (r.ec == std::errc::result_out_of_range) {
      if (overflows(token)) error_at(start, "the number " + v.string_ + " is out of range");
      v.number_ = token[0] == '-' ? -0.0 : 0.0;  // underflow: as close to zero as it gets
    } else if (r.ec != std::errc() || r.ptr != token.data() + token.size()) {
      error_at(start, "malformed number '" + v.string_ + "'");
    }
    if (integral) {
      int64_t i = 0;
      const auto ri = std::from_chars(token.data(), token.data() + token.size(), i);
      v.integral_ = ri.ec == std::errc() && ri.ptr == token.data() + token.size();
      v.integer_ = i;
    } else if (std::isfinite(v.number_) && v.number_ == std::trunc(v.number_) &&
               v.number_ >= -9223372036854775808.0 && v.number_ < 9223372036854775808.0) {
      v.integral_ = true;  // 4.0 and 1e3 are fine integers; the range check keeps the cast defined
      v.integer_ = static_cast<int64_t>(v.number_);
    }
  }

  // Whether an out-of-range number is too large (rather than too close to
  // zero): the power of ten of its first significant digit is positive.
  static bool overflows(std::string_view t) {
    size_t i = t[0] == '-' ? 1 : 0;
    int64_t int_digits = 0, lead = -1, position = 0;  // lead: position of the first non-zero digit
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i, ++position, ++int_digits)
      if (lead < 0 && t[i] != '0') lead = position;
    if (i < t.size() && t[i] == '.')
      for (++i; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i, ++position)
        if (lead < 0 && t[i] != '0') lead = position;
    int64_t exponent = 0;
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      ++i;
      const bool negative = t[i] == '-';
      if (t[i] == '+' || t[i] == '-') ++i;
      for (; i < t.size(); ++i) exponent = std::min<int64_t>(exponent * 10 + (t[i] - '0'), 1 << 30);
      if (negative) exponent = -exponent;
    }
    return lead >= 0 && int_digits - 1 - lead + exponent > 0;
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
      const char c = s_[pos_];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        error("bad \\u escape: " + here() + " is not a hex digit");
      ++pos_;
    }
    return v;
  }

  // Length of the well-formed UTF-8 sequence at pos_ (RFC 3629: no overlong
  // forms, no surrogates, nothing past U+10FFFF), or 0.
  size_t utf8_length() const {
    const auto b = [&](size_t k) {
      return pos_ + k < s_.size() ? static_cast<unsigned char>(s_[pos_ + k]) : 0u;
    };
    const unsigned c = b(0);
    auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
      return b(k) >= lo && b(k) <= hi;
    };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  std::string string() {
    if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a string, found " + here());
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        break;
      }
      if (c < 0x20) error("control character " + here() + " inside a string (escape it)");
      if (c >= 0x80) {
        const size_t n = utf8_length();
        if (n == 0) error("invalid UTF-8 (" + here() + ") inside a string");
        out.append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= s_.size()) error("unterminated escape");
      const char e = s_[pos_];
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
          ++pos_;
          const size_t at = pos_ - 2;
          uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp < 0xE000) error_at(at, "unpaired low surrogate \\u escape");
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (s_.substr(pos_, 2) != "\\u") error_at(at, "unpaired high surrogate \\u escape");
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000)
              error_at(at, "a high surrogate \\u escape must be followed by a low one");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          continue;  // hex4 moved past the digits
        }
        default: error("unknown escape \\" + here());
      }
      ++pos_;
    }
    return out;
  }

  std::string_view s_;
  std::string where_;
  size_t pos_ = 0;
  int64_t values_ = 0;
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
  if (type_ != Type::Number) type_error(what, "an integer");
  if (!integral_)
    fail(EG_ERR_INVALID_ARGUMENT, what + " must be an integer within 64 bits, got " + string_);
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

}  // namespace encoder_kit
