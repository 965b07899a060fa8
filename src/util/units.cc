#include "util/units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>

#include "util/strings.h"

namespace gpulane {
namespace {

// Sizes of this many bytes or more are refused: just under 2^64 (1.8447e19), so that every size
// accepted converts to std::uint64_t.
constexpr double kMaxBytes = 1.8e19;

// Splits "1.5GiB" into 1.5 and "gib"; false if there is no leading number.
bool SplitNumber(std::string_view text, double* number, std::string* unit) {
  std::size_t i = 0;
  bool digits = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    digits = digits || text[i] != '.';
    ++i;
  }
  if (!digits) return false;
  try {
    std::size_t used = 0;
    *number = std::stod(std::string(text.substr(0, i)), &used);
    if (used != i) return false;
  } catch (...) {
    return false;
  }
  *unit = ToLower(Trim(text.substr(i)));
  return true;
}

// What to suggest for a size typed without a unit: bytes for numbers that look like byte counts,
// else GiB (what people mean by "--mem 30").
std::string UnitHint(std::string_view number_text, double number) {
  if (number >= static_cast<double>(1ULL << 20))
    return fmt::format("{}B ({})", number_text, FormatBytes(static_cast<std::uint64_t>(number)));
  return fmt::format("{}GiB", number_text);
}

}  // namespace

Result<std::uint64_t> ParseSizeBytes(std::string_view input) {
  const std::string_view text = Trim(input);
  auto bad = [&] {
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("cannot read '{}' as a memory size: give a number and a unit, e.g. 20GiB, 20G, "
                                 "512MiB, or bytes with B: 1048576B",
                                 input));
  };
  double number = 0;
  std::string unit;
  if (!SplitNumber(text, &number, &unit)) return bad();
  auto too_large = [&] {
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("'{}' is too large for a memory size (at most 16 EiB)", input));
  };
  if (number >= kMaxBytes) return too_large();  // whatever the unit: no hint shows it as a size
  if (unit.empty() && number != 0)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("'{}' has no unit: did you mean {}? (units: GiB or G, MiB or M, KiB, TiB; B for bytes)",
                                 input, UnitHint(text, number)));
  // Binary however spelt: GPU memory is sold and reported in GiB/MiB (units.h says why).
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kib" || unit == "kb") scale = 1024.0;
  else if (unit == "m" || unit == "mib" || unit == "mb") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib" || unit == "gb") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib" || unit == "tb") scale = 1024.0 * 1024 * 1024 * 1024;
  else return bad();
  double bytes = number * scale;
  if (!std::isfinite(bytes) || bytes >= kMaxBytes) return too_large();
  // std::round, not std::llround: a long long ends at 2^63, and llround of more gave 2^63.
  return static_cast<std::uint64_t>(std::round(bytes));
}

namespace {

// The duration `input` reads as (units.h); a bare number is seconds when `bare_is_seconds`, else
// refused with a hint naming `likely_unit`.
Result<double> ParseDuration(std::string_view input, bool bare_is_seconds, std::string_view likely_unit) {
  std::string_view text = Trim(input);
  auto bad = [&] {
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("cannot read '{}' as a duration: give a number and a unit, e.g. 500ms, 30s, 10m, "
                                 "2h, 1h30m, 3d",
                                 input));
  };
  if (text.empty()) return bad();
  double total = 0;
  bool bare = false;  // a number without a unit (only the last one may be)
  while (!text.empty()) {
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == 0) return bad();
    double number = 0;
    try {
      std::size_t used = 0;
      number = std::stod(std::string(text.substr(0, i)), &used);
      if (used != i) return bad();
    } catch (...) {
      return bad();
    }
    std::size_t j = i;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
    std::string unit = ToLower(text.substr(i, j - i));
    double scale = 0;
    if (unit.empty() || unit == "s" || unit == "sec") scale = 1;
    else if (unit == "ms") scale = 1e-3;
    else if (unit == "m" || unit == "min") scale = 60;
    else if (unit == "h") scale = 3600;
    else if (unit == "d") scale = 86400;
    else return bad();
    if (unit.empty() && j != text.size()) return bad();
    bare = bare || (unit.empty() && number != 0);
    total += number * scale;
    text = text.substr(j);
  }
  if (!std::isfinite(total)) return bad();  // 308 digits of days: no duration, not infinity
  if (bare && !bare_is_seconds) {
    const std::string_view typed = Trim(input);
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("'{}' has no unit: did you mean {}{}? (a duration needs one: ms, s, m or min, h, d; "
                                 "e.g. 90s, 90m, 1h30m)",
                                 input, typed, likely_unit));
  }
  return total;
}

}  // namespace

Result<double> ParseDurationS(std::string_view text, std::string_view likely_unit) {
  return ParseDuration(text, false, likely_unit);
}

Result<double> ParseDurationOrSecondsS(std::string_view text) { return ParseDuration(text, true, "s"); }

std::string FormatBytes(std::uint64_t bytes) {
  const double gib = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  if (gib >= 100) return fmt::format("{:.0f} GiB", gib);
  if (gib >= 1) return fmt::format("{:.1f} GiB", gib);
  return fmt::format("{} MiB", BytesToMib(bytes));
}

std::string FormatMib(std::uint64_t bytes) {
  if (bytes % (1ULL << 20) == 0) return fmt::format("{} MiB", BytesToMib(bytes));
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024));
}

std::pair<std::string, std::string> FormatBytesApart(std::uint64_t a, std::uint64_t b) {
  std::pair<std::string, std::string> out{FormatBytes(a), FormatBytes(b)};
  if (a == b || out.first != out.second) return out;
  const double unit = std::max(a, b) >= (1ULL << 30) ? 1024.0 * 1024 * 1024 : 1024.0 * 1024;
  const char* name = unit > 1024.0 * 1024 * 1024 - 1 ? "GiB" : "MiB";
  const auto in_unit = [&](std::uint64_t bytes, int decimals) {
    const double v = static_cast<double>(bytes) / unit;
    if (bytes % static_cast<std::uint64_t>(unit) == 0) return fmt::format("{:.0f} {}", v, name);
    return fmt::format("{:.{}f} {}", v, decimals, name);
  };
  // Apart when their rounded values differ ("140.0 GiB" and "140 GiB" read as the same size).
  const auto rounded = [&](std::uint64_t bytes, int decimals) {
    return std::llround(static_cast<double>(bytes) / unit * std::pow(10.0, decimals));
  };
  for (int decimals = 1; decimals <= 3; ++decimals)
    if (rounded(a, decimals) != rounded(b, decimals)) return {in_unit(a, decimals), in_unit(b, decimals)};
  return {fmt::format("{}B", a), fmt::format("{}B", b)};
}

std::string FormatSeconds(double seconds) {
  if (seconds < 10) return fmt::format("{:.1f} s", seconds);
  auto s = static_cast<long long>(seconds);
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{}m {:02}s", s / 60, s % 60);
  return fmt::format("{}h {:02}m", s / 3600, (s % 3600) / 60);
}

}  // namespace gpulane
