// A float as messages print it: the shortest text that reads back as the same
// value ("0.5", "300", "1e+300"), never std::to_string's fixed six decimals
// (1e300 as a 301-digit integer, 1e-9 as "0.000000").
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace encgraph::host {

inline std::string number_text(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;  // NaN never equals: 17 digits, "nan"
  }
  return buf;
}

}  // namespace encgraph::host
