#include "util/display_width.h"

#include "util/utf8.h"

namespace gpulane {
namespace {

struct Range {
  char32_t first, last;
};

constexpr Range kZeroWidth[] = {{0x0300, 0x036f}, {0x200b, 0x200f}, {0x20d0, 0x20ff}, {0xfe00, 0xfe0f}, {0xfe20, 0xfe2f}};
constexpr Range kWide[] = {{0x1100, 0x115f},   {0x2e80, 0x303e},   {0x3041, 0x33ff},   {0x3400, 0x4dbf},
                           {0x4e00, 0x9fff},   {0xa000, 0xa4cf},   {0xac00, 0xd7a3},   {0xf900, 0xfaff},
                           {0xfe30, 0xfe4f},   {0xff00, 0xff60},   {0xffe0, 0xffe6},   {0x1f300, 0x1f64f},
                           {0x1f900, 0x1f9ff}, {0x20000, 0x2fffd}, {0x30000, 0x3fffd}};

template <std::size_t N>
bool In(const Range (&ranges)[N], char32_t c) {
  for (const Range& r : ranges)
    if (c >= r.first && c <= r.last) return true;
  return false;
}

// The code point of the well-formed sequence of `n` bytes at the start of `text`.
char32_t Decode(std::string_view text, std::size_t n) {
  const auto b = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[i])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
    case 3: return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
  }
}

// Bytes and columns of the character at the start of `text` (an ill-formed byte: 1 and 1).
std::pair<std::size_t, int> NextCharacter(std::string_view text) {
  const std::size_t n = Utf8SequenceLength(text);
  if (n == 0) return {1, 1};
  return {n, CodePointColumns(Decode(text, n))};
}

}  // namespace

int CodePointColumns(char32_t c) {
  if (In(kZeroWidth, c)) return 0;
  return In(kWide, c) ? 2 : 1;
}

std::size_t DisplayColumns(std::string_view text) {
  std::size_t columns = 0;
  while (!text.empty()) {
    auto [bytes, width] = NextCharacter(text);
    columns += static_cast<std::size_t>(width);
    text.remove_prefix(bytes);
  }
  return columns;
}

std::string_view PrefixOfColumns(std::string_view text, std::size_t columns) {
  std::size_t used = 0, end = 0;
  while (end < text.size()) {
    auto [bytes, width] = NextCharacter(text.substr(end));
    if (used + static_cast<std::size_t>(width) > columns) break;
    used += static_cast<std::size_t>(width);
    end += bytes;
  }
  return text.substr(0, end);
}

std::string FitColumns(std::string_view text, std::size_t columns, bool right_align) {
  const std::size_t width = DisplayColumns(text);
  if (width > columns) {
    if (columns == 0) return "";
    std::string cut(PrefixOfColumns(text, columns - 1));
    cut += '~';
    return cut + std::string(columns - DisplayColumns(cut), ' ');  // a wide character may leave one
  }
  const std::string pad(columns - width, ' ');
  return right_align ? pad + std::string(text) : std::string(text) + pad;
}

}  // namespace gpulane
