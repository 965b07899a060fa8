#include "render/top_keys.h"

#include "util/utf8.h"

namespace gpulane {
namespace {

constexpr std::size_t kMaxFilterBytes = 64;

// Bytes of the escape sequence at the start of `bytes` (which starts with ESC and has more).
std::size_t EscapeSequenceLength(std::string_view bytes) {
  if (bytes[1] == '[') {  // CSI: parameters and intermediates up to a final byte 0x40..0x7e
    std::size_t i = 2;
    while (i < bytes.size() && !(bytes[i] >= 0x40 && bytes[i] <= 0x7e)) ++i;
    return std::min(i + 1, bytes.size());
  }
  if (bytes[1] == 'O') return std::min<std::size_t>(3, bytes.size());  // SS3: F1-F4, keypad
  return 2;                                                           // Alt+key
}

TopAction Sort(TopUi& ui, TopSort sort) {
  ui.sort = sort;
  return TopAction::kRedraw;
}

TopAction Prompt(TopUi& ui, const TopKey& key) {
  switch (key.kind) {
    case TopKey::kText:
      if (ui.edit_text.size() + key.text.size() <= kMaxFilterBytes) ui.edit_text += key.text;
      return TopAction::kRedraw;
    case TopKey::kBackspace:
      while (!ui.edit_text.empty()) {
        const char last = ui.edit_text.back();
        ui.edit_text.pop_back();
        if ((static_cast<unsigned char>(last) & 0xc0) != 0x80) break;  // the first byte of a character
      }
      return TopAction::kRedraw;
    case TopKey::kEnter:
      ui.user_filter = ui.edit_text;
      ui.editing = false;
      return TopAction::kRedraw;
    case TopKey::kEscape:
      ui.editing = false;
      return TopAction::kRedraw;
    case TopKey::kOther: return TopAction::kNone;
  }
  return TopAction::kNone;
}

}  // namespace

std::vector<TopKey> DecodeTopKeys(std::string_view bytes) {
  std::vector<TopKey> keys;
  while (!bytes.empty()) {
    const auto c = static_cast<unsigned char>(bytes.front());
    std::size_t n = 1;
    TopKey key;
    if (c == 0x1b) {
      if (bytes.size() == 1) key.kind = TopKey::kEscape;
      else n = EscapeSequenceLength(bytes);
    } else if (c == '\r' || c == '\n') {
      key.kind = TopKey::kEnter;
    } else if (c == 0x7f || c == 0x08) {
      key.kind = TopKey::kBackspace;
    } else if (c >= 0x20 && c < 0x7f) {
      key = {TopKey::kText, std::string(1, static_cast<char>(c))};
    } else if (c >= 0x80) {
      n = Utf8SequenceLength(bytes);
      if (n == 0) n = 1;
      else key = {TopKey::kText, std::string(bytes.substr(0, n))};
    }
    keys.push_back(std::move(key));
    bytes.remove_prefix(n);
  }
  return keys;
}

TopAction ApplyTopKey(TopUi& ui, const TopKey& key) {
  if (ui.editing) return Prompt(ui, key);
  if (key.kind == TopKey::kEscape) {
    if (ui.user_filter.empty()) return TopAction::kNone;
    ui.user_filter.clear();
    return TopAction::kRedraw;
  }
  if (key.kind != TopKey::kText || key.text.size() != 1) return TopAction::kNone;
  switch (key.text[0]) {
    case 'q': case 'Q': return TopAction::kQuit;
    case 'g': return Sort(ui, TopSort::kGpu);
    case 'm': return Sort(ui, TopSort::kMemory);
    case 'u': return Sort(ui, TopSort::kUtil);
    case 'n': return Sort(ui, TopSort::kUser);
    case 'p': return Sort(ui, TopSort::kPid);
    case 'r':
      ui.reverse = !ui.reverse;
      return TopAction::kRedraw;
    case 'f': case '/':
      ui.editing = true;
      ui.edit_text = ui.user_filter;
      return TopAction::kRedraw;
    default: return TopAction::kNone;
  }
}

}  // namespace gpulane
