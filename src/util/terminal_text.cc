#include "util/terminal_text.h"

#include "util/utf8.h"

namespace gpulane {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendHexByte(const char* prefix, unsigned char byte, std::string& out) {
  out += prefix;
  out += kHex[byte >> 4];
  out += kHex[byte & 0xf];
}

}  // namespace

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const auto lead = static_cast<unsigned char>(text.front());
    if (lead >= 0x20 && lead < 0x7f) {
      out += text.front();
      text.remove_prefix(1);
      continue;
    }
    const std::size_t n = Utf8SequenceLength(text);
    if (n <= 1) {  // a C0 control, DEL, or a byte outside well-formed UTF-8
      AppendHexByte("\\x", lead, out);
      text.remove_prefix(1);
      continue;
    }
    const auto second = static_cast<unsigned char>(text[1]);
    if (lead == 0xc2 && second <= 0x9f) AppendHexByte("\\u00", second, out);  // C1: U+0080–U+009F
    else out.append(text.substr(0, n));
    text.remove_prefix(n);
  }
  return out;
}

}  // namespace gpulane
