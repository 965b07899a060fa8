#pragma once
// Small string helpers shared by parsers.
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gpulane {

/// Removes ASCII whitespace at both ends.
std::string_view Trim(std::string_view text);
/// ASCII lower case.
std::string ToLower(std::string_view text);
/// Splits on `sep`, keeping empty fields ("a,,b" -> {"a","","b"}; "" -> {""}).
std::vector<std::string> Split(std::string_view text, char sep);
/// Joins with `sep`.
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
/// "1st", "2nd", "3rd", "4th", "11th", "21st": a place in line, for people.
std::string Ordinal(unsigned n);
/// True if `text` starts with `prefix`, ignoring ASCII case.
bool StartsWithNoCase(std::string_view text, std::string_view prefix);
/// Parses a non-negative decimal integer that fills all of `text`; false otherwise.
bool ParseUint(std::string_view text, unsigned long long* out);

namespace detail {
inline void AppendPart(std::string& out, std::string_view part) { out += part; }
inline void AppendPart(std::string& out, char part) { out += part; }
template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, bool>>>
void AppendPart(std::string& out, T part) {
  out += std::to_string(part);
}
}  // namespace detail

/// Concatenates strings, characters and integers ("GPU", 3, ": ") -> "GPU3: "; for code that may
/// use nothing but the standard library and util/ (sched/).
template <typename... Parts>
std::string StrCat(const Parts&... parts) {
  std::string out;
  (detail::AppendPart(out, parts), ...);
  return out;
}

}  // namespace gpulane
