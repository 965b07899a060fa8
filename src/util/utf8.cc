#include "util/utf8.h"

namespace gpulane {

std::size_t Utf8SequenceLength(std::string_view text) {
  if (text.empty()) return 0;
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return 1;
  // The lead byte fixes the length and the range of the second byte (Unicode 15, table 3-7);
  // every later byte is 0x80–0xBF.
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) length = 2;
  else if (lead == 0xe0) length = 3, low = 0xa0;           // no overlong 3-byte forms
  else if (lead >= 0xe1 && lead <= 0xec) length = 3;
  else if (lead == 0xed) length = 3, high = 0x9f;          // no surrogates
  else if (lead >= 0xee && lead <= 0xef) length = 3;
  else if (lead == 0xf0) length = 4, low = 0x90;           // no overlong 4-byte forms
  else if (lead >= 0xf1 && lead <= 0xf3) length = 4;
  else if (lead == 0xf4) length = 4, high = 0x8f;          // nothing above U+10FFFF
  else return 0;
  if (text.size() < length) return 0;
  if (b(1) < low || b(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i)
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  return length;
}

bool IsValidUtf8(std::string_view text) {
  while (!text.empty()) {
    const std::size_t n = Utf8SequenceLength(text);
    if (n == 0) return false;
    text.remove_prefix(n);
  }
  return true;
}

}  // namespace gpulane
