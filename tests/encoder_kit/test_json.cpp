// The kit's JSON reader: strict grammar, integers that are integers, bounded
// nesting and size, and errors that say where.
#include "kit_test_support.hpp"

#include <encoder_kit/json.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace {

using kit_test::contains;
using kit_test::failure_of;

encoder_kit::Json parse(const std::string& text) {
  return encoder_kit::Json::parse(text, "t.json");
}

// The message of a parse that must fail (empty when it did not).
std::string parse_error(const std::string& text) {
  const kit_test::Failure f = failure_of([&] { parse(text); });
  CHECK_MESSAGE(f.thrown, "accepted: " << text);
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  return f.message;
}

}  // namespace

TEST_CASE("values of every type read back") {
  const encoder_kit::Json j =
      parse(R"( {"a": [1, -2.5, true, false, null], "b": {"c": "x\u00e9\ud83d\ude00"}} )");
  const auto& a = j.find("a")->as_array("a");
  REQUIRE(a.size() == 5);
  CHECK(a[0].as_int("a0") == 1);
  CHECK(a[1].as_double("a1") == -2.5);
  CHECK(a[2].as_bool("a2"));
  CHECK_FALSE(a[3].as_bool("a3"));
  CHECK(a[4].is_null());
  CHECK(j.find("b")->find("c")->as_string("c") == "x\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(j.find("none") == nullptr);
}

TEST_CASE("random integers within 64 bits read exactly; integral doubles count") {
  for (int i = 0; i < 200; ++i) {
    const int64_t v =
        kit_test::uniform(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    CAPTURE(v);
    CHECK(parse(std::to_string(v)).as_int("v") == v);
  }
  CHECK(parse("4.0").as_int("v") == 4);
  CHECK(parse("1e3").as_int("v") == 1000);
  CHECK(parse("-0").as_int("v") == 0);
}

TEST_CASE("a number that is no 64-bit integer is an error when read as one, never a cast") {
  for (const char* text : {"1e300", "-1e300", "0.5", "9223372036854775808", "-9223372036854775809",
                           "99999999999999999999", "9.3e18", "-9.3e18", "1.5e0"}) {
    CAPTURE(text);
    const encoder_kit::Json j = parse(text);
    CHECK(j.is_number());
    const kit_test::Failure f = failure_of([&] { j.as_int("shape entry"); });
    CHECK(f.thrown);
    CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
    CHECK(contains(f.message, "shape entry must be an integer"));
    CHECK(contains(f.message, text));  // the number as written
  }
  // Random doubles beyond int64: refused, whatever their size.
  for (int i = 0; i < 100; ++i) {
    const double v =
        std::ldexp(1.0 + static_cast<double>(kit_test::uniform(0, 1 << 20)) / (1 << 20),
                   static_cast<int>(kit_test::uniform(63, 1000)));
    char text[64];
    std::snprintf(text, sizeof(text), "%.17g", v);
    CAPTURE(text);
    CHECK(failure_of([&] { parse(text).as_int("v"); }).thrown);
  }
}

TEST_CASE("numbers follow JSON's grammar and the double range") {
  for (const char* text : {"01", "+1", ".5", "1.", "1e", "1e+", "-", "--1", "0x10", "1.5.2", "NaN",
                           "Infinity", "-Infinity", "1_000"})
    CHECK(contains(parse_error(text), "t.json: invalid JSON"));
  CHECK(contains(parse_error("1e400"), "out of range"));
  CHECK(contains(parse_error("-1e400"), "out of range"));
  CHECK(contains(parse_error("0.001e312"), "out of range"));
  CHECK(parse("1e-400").as_double("tiny") == 0.0);  // underflow: as near zero as it gets
  CHECK(parse("0.00001e-320").as_double("tiny") == 0.0);
  CHECK(parse("-2.5E+3").as_double("v") == -2500.0);
}

TEST_CASE("deep nesting is an error, not a stack overflow") {
  const int limit = encoder_kit::Json::kMaxDepth;
  std::string ok(static_cast<size_t>(limit), '[');
  ok += std::string(static_cast<size_t>(limit), ']');
  CHECK_NOTHROW(parse(ok));
  for (int depth : {limit + 2, 100000, 1000000}) {
    CAPTURE(depth);
    const std::string arrays(static_cast<size_t>(depth), '[');
    CHECK(contains(parse_error(arrays), "nested deeper than"));
    std::string objects;
    for (int i = 0; i < std::min(depth, 200000); ++i) objects += "{\"a\":";
    CHECK(contains(parse_error(objects), "nested deeper than"));
  }
}

TEST_CASE("more values than the reader's limit is an error") {
  std::string many = "[";
  for (int64_t i = 0; i <= encoder_kit::Json::kMaxValues; ++i) many += "0,";
  many += "0]";
  CHECK(contains(parse_error(many), "more than"));
}

TEST_CASE("strings: invalid UTF-8, control characters, bad escapes and lone surrogates") {
  const char* bad[] = {
      "\"\xff\"",              // never valid in UTF-8
      "\"\xc3\"",              // truncated sequence
      "\"\xc0\xaf\"",          // overlong '/'
      "\"\xe0\x80\xaf\"",      // overlong, 3 bytes
      "\"\xed\xa0\x80\"",      // an encoded surrogate
      "\"\xf4\x90\x80\x80\"",  // past U+10FFFF
      "\"a\nb\"",              // raw newline
      "\"a\tb\"",              // raw tab
      "\"\\x41\"",             // unknown escape
      "\"\\u12\"",             // short \u
      "\"\\u12G4\"",           // not hex
      "\"\\ud800\"",           // high surrogate alone
      "\"\\ud800\\u0041\"",    // high surrogate, then no low one
      "\"\\udc00\"",           // low surrogate alone
      "\"abc",                 // unterminated
  };
  for (const char* text : bad) {
    CAPTURE(text);
    const std::string msg = parse_error(text);
    CHECK(contains(msg, "line 1, column"));
  }
  CHECK(contains(parse_error("\"\xff\""), "invalid UTF-8"));
  CHECK(contains(parse_error("\"a\nb\""), "control character"));
  CHECK(contains(parse_error("\"\\ud800\""), "unpaired high surrogate"));
  // Valid multi-byte text passes through unchanged.
  CHECK(parse("\"\xe2\x82\xac \xf0\x9f\x8c\x8d\"").as_string("s") ==
        "\xe2\x82\xac \xf0\x9f\x8c\x8d");
}

TEST_CASE("trailing garbage, bad tokens and duplicate keys are refused with a position") {
  std::string msg = parse_error("{\"a\": 1}\n  x");
  CHECK(contains(msg, "trailing characters"));
  CHECK(contains(msg, "line 2, column 3 (byte 11)"));
  CHECK(contains(parse_error("[1, 2,]"), "unexpected ']'"));
  CHECK(contains(parse_error("{\"a\" 1}"), "expected ':'"));
  CHECK(contains(parse_error("tru"), "expected a value"));
  CHECK(contains(parse_error(""), "unexpected end of text"));
  CHECK(contains(parse_error("\xef\xbb\xbf{}"), "byte 0xef"));  // a byte-order mark
  msg = parse_error("{\"w\": {\"x\": 1, \"y\": 2, \"x\": 3}}");
  CHECK(contains(msg, "key \"x\" twice"));
  CHECK(contains(msg, "byte 6"));  // where the object starts
}

TEST_CASE("accessors name the value and the expected type") {
  const encoder_kit::Json j = parse(R"({"s": "x", "n": 1})");
  CHECK(contains(failure_of([&] { j.find("s")->as_int("vision_config.depth"); }).message,
                 "vision_config.depth must be an integer"));
  CHECK(contains(failure_of([&] { j.find("n")->as_string("dtype"); }).message,
                 "dtype must be a string"));
  CHECK(contains(failure_of([&] { j.as_array("shape"); }).message, "shape must be an array"));
}

TEST_CASE("random byte strings never crash the reader") {
  const std::string alphabet = "{}[]\",:0123456789.eE+-tfnrul\\ \n\x80\xff\xc3\xa9";
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int64_t n = kit_test::uniform(0, 40);
    for (int64_t k = 0; k < n; ++k)
      text += alphabet[static_cast<size_t>(kit_test::uniform(0, alphabet.size() - 1))];
    try {
      parse(text);
    } catch (const encoder_kit::Error& e) {
      CHECK(contains(e.what(), "t.json"));
    }
  }
}
