#include "cli/top_terminal.h"

#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace gpulane::cli {
namespace {

constexpr const char* kEnterScreen = "\x1b[?1049h\x1b[?25l\x1b[2J";  // alternate screen, cursor hidden
constexpr const char* kLeaveScreen = "\x1b[0m\x1b[?25h\x1b[?1049l";  // colours off, cursor shown, main screen

// Writes all of `bytes` to stdout; false when it cannot (the terminal is gone).
bool WriteAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(STDOUT_FILENO, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

sigset_t ViewSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP, SIGCONT}) sigaddset(&set, s);
  return set;
}

}  // namespace

bool LocaleIsUtf8() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    std::string v(value);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    return v.find("utf-8") != std::string::npos || v.find("utf8") != std::string::npos;
  }
  return false;
}

Result<std::unique_ptr<TopTerminal>> TopTerminal::Enter() {
  std::unique_ptr<TopTerminal> t(new TopTerminal());
  const sigset_t set = ViewSignals();
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0 ||
      (t->signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot watch for signals: {}", std::strerror(errno)));
  t->keys_ = isatty(STDIN_FILENO) == 1 && tcgetattr(STDIN_FILENO, &t->saved_) == 0;
  if (!t->Setup()) return MakeError(ErrorKind::kIo, fmt::format("cannot set up the terminal: {}", std::strerror(errno)));
  return t;
}

bool TopTerminal::Setup() {
  if (keys_) {
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0) return false;
  }
  entered_ = true;
  shown_.clear();
  return WriteAll(kEnterScreen);
}

void TopTerminal::Leave() {
  if (!entered_) return;
  entered_ = false;
  WriteAll(kLeaveScreen);
  if (keys_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

TopTerminal::~TopTerminal() {
  Leave();
  // The signals stay blocked: the command ends next, and a second Ctrl-C pending now must not
  // change its exit code.
  if (signal_fd_ >= 0) close(signal_fd_);
}

std::string TopTerminal::ReadKeys() {
  char buf[256];
  const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
  if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
  if (n == 0 || (errno != EINTR && errno != EAGAIN)) keys_ = false;  // hung up: no more keys
  return "";
}

void TopTerminal::Suspend() {
  Leave();
  kill(getpid(), SIGSTOP);  // cannot be blocked; SIGCONT (fg) continues here
  Setup();
}

TerminalEvent TopTerminal::TakeSignal() {
  signalfd_siginfo info{};
  if (read(signal_fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return TerminalEvent::kNone;
  switch (static_cast<int>(info.ssi_signo)) {
    case SIGWINCH: shown_.clear(); return TerminalEvent::kResized;
    case SIGTSTP: Suspend(); return TerminalEvent::kResumed;
    case SIGCONT:
      if (!entered_) Setup();
      shown_.clear();
      return TerminalEvent::kResumed;
    default: return TerminalEvent::kQuit;  // SIGINT, SIGTERM, SIGHUP
  }
}

TerminalSize TopTerminal::Size() const {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0) return {};
  return {ws.ws_col, ws.ws_row};
}

bool TopTerminal::Draw(const std::vector<std::string>& lines) {
  std::string out = shown_.empty() ? "\x1b[2J" : "";
  for (std::size_t row = 0; row < lines.size(); ++row)
    if (row >= shown_.size() || shown_[row] != lines[row])
      out += fmt::format("\x1b[{};1H\x1b[2K{}", row + 1, lines[row]);  // erase first: no wrap at the last column
  for (std::size_t row = lines.size(); row < shown_.size(); ++row) out += fmt::format("\x1b[{};1H\x1b[2K", row + 1);
  shown_ = lines;
  return out.empty() || WriteAll(out);
}

}  // namespace gpulane::cli
