#pragma once
// A terminal for tests of full-screen views (`gpulane top`): a detached tmux session of a fixed
// size on a server of its own (its socket in the test's folder, no user configuration), keys sent
// with send-keys and the screen read with capture-pane, as a user at a terminal would see it.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "support/harness.h"

namespace gpulane::test {

/// The tmux binary on PATH; "" when there is none (scripts/test.sh installs it).
std::string TmuxBinary();

/// A shell script that exports `env` (a value of "\x01unset" unsets the variable) and then runs
/// `body`: for a pane's command, which tmux starts in its server's environment, not the test's.
std::string ScriptWithEnv(const Env& env, const std::string& body);

class TmuxSession {
 public:
  /// Starts `tmux new-session -d` of `columns` x `rows` running `sh script` in `dir`; the pane stays
  /// after the script ends (remain-on-exit), so what it left on the screen can be read.
  TmuxSession(const std::filesystem::path& dir, const std::filesystem::path& script, int columns, int rows);
  ~TmuxSession();
  TmuxSession(const TmuxSession&) = delete;
  TmuxSession& operator=(const TmuxSession&) = delete;

  /// Whether the session started (a test failure was added when not).
  bool started() const { return started_; }
  /// The pane's visible screen, one line per row, trailing blanks removed.
  std::vector<std::string> Screen() const;
  /// The screen as one text, rows joined by "\n" (for failure messages).
  std::string ScreenText() const;
  /// Sends keys as send-keys names them ("q", "Enter", "Escape", "C-c").
  void Keys(const std::vector<std::string>& keys) const;
  /// Types `text` literally (send-keys -l).
  void Type(const std::string& text) const;
  /// Resizes the window (and so the pane, which gets SIGWINCH) to `columns` x `rows`.
  void Resize(int columns, int rows) const;
  /// A tmux format about the pane (display-message -p), e.g. "#{alternate_on}".
  std::string Format(const std::string& format) const;
  /// Reads the screen again and again until `predicate` holds for it, up to `timeout_s`.
  bool WaitForScreen(const std::function<bool(const std::vector<std::string>&)>& predicate, double timeout_s = 20) const;

 private:
  RunResult Tmux(std::vector<std::string> args) const;
  std::string socket_;
  bool started_ = false;
};

}  // namespace gpulane::test
