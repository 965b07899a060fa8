#include "util/bytes_json.h"

#include "util/utf8.h"

namespace gpulane {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The 6-bit value of a base64 digit; -1 for anything else ('=' included).
int DigitValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                            static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                            static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 0x3f];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 0x3f];
    out += kAlphabet[(v >> 12) & 0x3f];
    out += rest == 2 ? kAlphabet[(v >> 6) & 0x3f] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    // Padding only at the very end: "xx==" (one byte) or "xxx=" (two).
    const std::size_t pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      int d = k >= 4 - pad ? 0 : DigitValue(text[i + k]);
      if (d < 0) return std::nullopt;
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    // The bits the padding leaves over must be zero (one spelling per value).
    if ((pad == 1 && (v & 0xff) != 0) || (pad == 2 && (v & 0xffff) != 0)) return std::nullopt;
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

nlohmann::json BytesToJson(std::string_view bytes) {
  if (IsValidUtf8(bytes)) return std::string(bytes);
  return nlohmann::json{{"b64", Base64Encode(bytes)}};
}

bool BytesFromJson(const nlohmann::json& j, std::string* out) {
  if (j.is_string()) {
    *out = j.get<std::string>();
    return true;
  }
  if (!j.is_object() || j.size() != 1) return false;
  auto it = j.find("b64");
  if (it == j.end() || !it->is_string()) return false;
  auto decoded = Base64Decode(it->get_ref<const std::string&>());
  if (!decoded) return false;
  *out = std::move(*decoded);
  return true;
}

nlohmann::json BytesListToJson(const std::vector<std::string>& values) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& v : values) list.push_back(BytesToJson(v));
  return list;
}

bool BytesListFromJson(const nlohmann::json& j, std::vector<std::string>* out) {
  if (!j.is_array()) return false;
  std::vector<std::string> values;
  values.reserve(j.size());
  for (const auto& element : j) {
    std::string v;
    if (!BytesFromJson(element, &v)) return false;
    values.push_back(std::move(v));
  }
  *out = std::move(values);
  return true;
}

}  // namespace gpulane
