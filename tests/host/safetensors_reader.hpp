// A minimal safetensors reader for the tests: the header as JSON and the raw
// bytes of each tensor, checking the layout rules readers rely on.
#pragma once

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace host_test {

struct Safetensors {
  nlohmann::json header;
  std::vector<uint8_t> data;
  uint64_t header_length = 0;

  std::vector<float> floats(const std::string& name) const {
    const auto& off = header.at(name).at("data_offsets");
    const size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
    std::vector<float> out((end - begin) / 4);
    std::memcpy(out.data(), data.data() + begin, end - begin);
    return out;
  }
};

inline Safetensors read_safetensors(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() >= 8);
  Safetensors st;
  for (int i = 7; i >= 0; --i) st.header_length = (st.header_length << 8) | bytes[i];
  REQUIRE(8 + st.header_length <= bytes.size());
  CHECK(st.header_length % 8 == 0);  // data starts aligned
  st.header = nlohmann::json::parse(bytes.begin() + 8,
                                    bytes.begin() + 8 + static_cast<long>(st.header_length));
  st.data.assign(bytes.begin() + 8 + static_cast<long>(st.header_length), bytes.end());
  // Every byte of the data belongs to exactly one tensor.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [name, t] : st.header.items())
    if (name != "__metadata__")
      ranges.emplace_back(t["data_offsets"][0].get<size_t>(), t["data_offsets"][1].get<size_t>());
  std::sort(ranges.begin(), ranges.end());
  size_t at = 0;
  for (const auto& [b, e] : ranges) {
    CHECK(b == at);
    at = e;
  }
  CHECK(at == st.data.size());
  return st;
}

}  // namespace host_test
