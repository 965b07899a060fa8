#pragma once
// How many terminal columns text takes, for views laid out to a terminal's width (gpulane top).
// Text passed here is already escaped (util/terminal_text.h): well-formed UTF-8 without controls.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpulane {

/// Columns one code point takes on a terminal: 0 for combining marks (U+0300–U+036F, U+20D0–U+20FF,
/// U+FE20–U+FE2F) and zero-width characters (U+200B–U+200F, U+FE00–U+FE0F), 2 for East Asian wide
/// and fullwidth characters and emoji (the main blocks of Unicode's EastAsianWidth W and F), else 1.
/// An approximation of wcwidth(3) that needs no locale; terminals themselves disagree at the edges.
int CodePointColumns(char32_t code_point);

/// Columns `text` takes (each ill-formed byte counted as 1).
std::size_t DisplayColumns(std::string_view text);

/// The longest prefix of `text` that fits in `columns` columns, never cut inside a character.
std::string_view PrefixOfColumns(std::string_view text, std::size_t columns);

/// `text` fitted to exactly `columns` columns: cut (its last column then "~" when something was
/// cut) or padded with spaces on the right (`right_align`: on the left).
std::string FitColumns(std::string_view text, std::size_t columns, bool right_align = false);

}  // namespace gpulane
