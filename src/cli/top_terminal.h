#pragma once
// The terminal of a full-screen view (`gpulane top`), with plain ANSI escape sequences (xterm's,
// which every terminal emulator and SSH client speaks; no curses): the alternate screen, a hidden
// cursor, keys read one by one (raw mode, signal keys kept), resizes and stop signals taken
// through a signalfd so the loop polls one descriptor for them. Leaving restores all of it, also
// when the view ends on SIGINT, SIGTERM or SIGHUP; Ctrl-Z leaves, stops, and comes back on fg.
#include <signal.h>
#include <termios.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "util/result.h"

namespace gpulane::cli {

/// Columns and rows of a terminal.
struct TerminalSize {
  std::size_t columns = 80;
  std::size_t rows = 24;
};

/// What a signal read from TopTerminal::signal_fd() asks of the view.
enum class TerminalEvent { kNone, kQuit, kResized, kResumed };

class TopTerminal {
 public:
  /// Takes over stdout (which must be a terminal) and, when it is one, stdin: blocks SIGINT,
  /// SIGTERM, SIGHUP, SIGWINCH, SIGTSTP and SIGCONT into a signalfd, then enters the alternate
  /// screen with the cursor hidden and stdin in raw mode (no echo, no line editing, no XON/XOFF;
  /// Ctrl-C still sends SIGINT). Errors: kIo when the signalfd or the terminal modes fail.
  static Result<std::unique_ptr<TopTerminal>> Enter();
  ~TopTerminal();
  TopTerminal(const TopTerminal&) = delete;
  TopTerminal& operator=(const TopTerminal&) = delete;

  /// The descriptor that is readable when a signal is pending: read it with TakeSignal().
  int signal_fd() const { return signal_fd_; }
  /// Whether keys can be read from stdin (it is a terminal and has not hung up).
  bool has_keys() const { return keys_; }
  /// Reads what is pending on stdin (at most 256 bytes); "" and has_keys() false after a hang-up.
  std::string ReadKeys();
  /// Reads one pending signal and does what it needs here (Ctrl-Z: leave, stop, come back).
  TerminalEvent TakeSignal();
  /// The terminal's size now (TIOCGWINSZ on stdout; 80x24 when it does not say).
  TerminalSize Size() const;
  /// Shows `lines` (one per row from the top, each already fitted to the width): only the rows that
  /// differ from the last Draw are written, in one write. False when the terminal is gone.
  bool Draw(const std::vector<std::string>& lines);
  /// Restores the terminal as Enter found it (modes, main screen, cursor). Idempotent.
  void Leave();

 private:
  TopTerminal() = default;
  bool Setup();
  void Suspend();

  int signal_fd_ = -1;
  bool keys_ = false;
  bool entered_ = false;
  termios saved_{};
  std::vector<std::string> shown_;  ///< the rows on the screen; empty: unknown, redraw all
};

/// Whether the locale the environment names (LC_ALL, else LC_CTYPE, else LANG) is UTF-8: then the
/// view draws bars and sparklines with block characters, else with ASCII.
bool LocaleIsUtf8();

}  // namespace gpulane::cli
