#pragma once
// `gpulane top`'s keys: the bytes a terminal sends in raw mode decoded into keys, and what each key
// does to the view's choices (render/top_view.h TopUi). Pure, for unit tests; cli/cmd_top.cc reads
// stdin and applies them.
//   q          quit
//   g m u n p  sort the processes by GPU, memory, utilisation, user name, pid
//   r          reverse the order
//   f or /     filter by user: type a name, Enter applies (empty: everyone), Esc cancels the prompt
//   Esc        clear the user filter
#include <string>
#include <string_view>
#include <vector>

#include "render/top_view.h"

namespace gpulane {

/// A key as decoded from terminal input.
struct TopKey {
  enum Kind { kText, kEnter, kEscape, kBackspace, kOther };
  Kind kind = kOther;
  std::string text;  ///< kText: one character (printable ASCII or one UTF-8 sequence)
};

/// The keys of `bytes`, one read of a terminal in raw mode. Escape sequences (arrows, function
/// keys: CSI "ESC [ ... final", SS3 "ESC O x", Alt+key "ESC x") are one kOther key each; a lone ESC
/// at the end is kEscape. CR and LF are kEnter, DEL and BS kBackspace, other controls kOther.
/// Bytes that are not well-formed UTF-8 are kOther each.
std::vector<TopKey> DecodeTopKeys(std::string_view bytes);

/// What a key asks of the loop.
enum class TopAction {
  kNone,    ///< nothing changed
  kRedraw,  ///< the choices changed: draw the screen again (no new readings needed)
  kQuit,
};

/// Applies `key` to `ui`: outside the prompt the keys of the table above; at the prompt, text is
/// added (up to 64 bytes), Backspace removes the last character, Enter applies, Esc cancels.
TopAction ApplyTopKey(TopUi& ui, const TopKey& key);

}  // namespace gpulane
