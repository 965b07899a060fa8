#pragma once
// Text from other people (job names, user names, process names and command lines, lease job ids,
// NVML's names, paths, daemon replies) made safe to print on a terminal: nothing in it can move the
// cursor, change colours, set the window title, write the clipboard (OSC 52) or start any other
// escape sequence. Everything gpulane prints for people passes field by field through
// EscapeForTerminal; gpulane's own colour codes are added around the escaped fields. JSON output
// is never escaped this way (JSON escapes control characters itself and stays exact).
#include <string>
#include <string_view>

namespace gpulane {

/// `text` with every byte or character a terminal could act on written visibly instead:
///   - C0 controls (0x00–0x1F: ESC, BEL, CR, LF, TAB, …) and DEL (0x7F) as "\x1b", "\x07", "\x7f";
///   - C1 controls (U+0080–U+009F, the UTF-8 pairs C2 80–C2 9F) as "\u009b";
///   - each byte that is not part of well-formed UTF-8 (util/utf8.h) as "\xff";
/// printable ASCII and well-formed UTF-8 of other characters are kept as they are. A backslash is
/// kept too, so the result is readable rather than reversible, and escaping twice changes nothing
/// more (EscapeForTerminal(EscapeForTerminal(x)) == EscapeForTerminal(x)). The result is always
/// well-formed UTF-8 without control characters.
std::string EscapeForTerminal(std::string_view text);

}  // namespace gpulane
