#pragma once
// Small string helpers shared by parsers.
#include <string>
#include <string_view>
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
/// True if `text` starts with `prefix`, ignoring ASCII case.
bool StartsWithNoCase(std::string_view text, std::string_view prefix);
/// Parses a non-negative decimal integer that fills all of `text`; false otherwise.
bool ParseUint(std::string_view text, unsigned long long* out);

}  // namespace gpulane
