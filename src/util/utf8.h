#pragma once
// UTF-8 validity as RFC 3629 and nlohmann::json define it: no overlong forms, no surrogates
// (U+D800–U+DFFF), nothing above U+10FFFF. Text that passes IsValidUtf8 can be written as a JSON
// string (nlohmann's strict dump accepts it) and printed as characters.
#include <cstddef>
#include <string_view>

namespace gpulane {

/// Length in bytes (1–4) of the well-formed UTF-8 sequence that starts `text`; 0 when `text` is
/// empty or its first byte does not start one (a stray continuation byte, an overlong or
/// truncated sequence, a surrogate, a code point above U+10FFFF, bytes 0xC0, 0xC1, 0xF5–0xFF).
std::size_t Utf8SequenceLength(std::string_view text);

/// True when all of `text` is well-formed UTF-8 (the empty string is).
bool IsValidUtf8(std::string_view text);

}  // namespace gpulane
