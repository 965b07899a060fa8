// Sizes and durations as users type them (util/units.h: ParseSizeBytes, ParseDurationS), and their
// formatting. Input: the text.
// Properties: a size read is the number times its binary unit (within rounding), never a wrapped
// or saturated value; the bytes form of a size (up to 2^53, exact in a double) reads back to the same bytes; a duration read is
// finite and >= 0; FormatBytes takes every size read, FormatSeconds every duration up to 1e12 s.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_check.h"
#include "util/units.h"

namespace {

// The number and unit scale of a size that ParseSizeBytes accepted, read independently.
double Expected(const std::string& text) {
  std::size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  std::size_t i = b;
  while (i < e && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const double number = std::strtod(text.substr(b, i - b).c_str(), nullptr);
  while (i < e && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const char unit = i < e ? static_cast<char>(std::tolower(static_cast<unsigned char>(text[i]))) : 'b';
  const double scale = unit == 'k' ? 1024.0 : unit == 'm' ? 1048576.0 : unit == 'g' ? 1073741824.0
                     : unit == 't' ? 1099511627776.0 : 1.0;
  return number * scale;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto bytes = gpulane::ParseSizeBytes(text)) {
    const double expected = Expected(text);
    const double got = static_cast<double>(*bytes);
    FUZZ_CHECK(std::fabs(got - expected) <= 1 + expected * 1e-12, "'%s' read as %llu bytes, not %.17g", text.c_str(),
               static_cast<unsigned long long>(*bytes), expected);
    if (*bytes <= (1ULL << 53)) {  // exact in a double, the parser's number
      auto again = gpulane::ParseSizeBytes(std::to_string(*bytes) + "B");
      FUZZ_CHECK(again && *again == *bytes, "%llu bytes do not read back", static_cast<unsigned long long>(*bytes));
    }
    (void)gpulane::FormatBytes(*bytes);
  }
  if (auto seconds = gpulane::ParseDurationS(text)) {
    FUZZ_CHECK(std::isfinite(*seconds) && *seconds >= 0, "'%s' read as %g seconds", text.c_str(), *seconds);
    if (*seconds < 1e12) (void)gpulane::FormatSeconds(*seconds);  // its domain: elapsed times
  }
  return 0;
}
