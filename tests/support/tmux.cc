#include "support/tmux.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace gpulane::test {

namespace fs = std::filesystem;

std::string TmuxBinary() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && access((fs::path(dir) / "tmux").c_str(), X_OK) == 0) return (fs::path(dir) / "tmux").string();
  return "";
}

std::string ScriptWithEnv(const Env& env, const std::string& body) {
  std::string out = "#!/bin/sh\n";
  for (const auto& [name, value] : env) {
    if (value == "\x01unset") {
      out += "unset " + name + "\n";
      continue;
    }
    std::string quoted = "'";
    for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += "export " + name + "=" + quoted + "'\n";
  }
  return out + body + "\n";
}

TmuxSession::TmuxSession(const fs::path& dir, const fs::path& script, int columns, int rows)
    : socket_((dir / "tmux.sock").string()) {
  const fs::path config = dir / "tmux.conf";
  std::ofstream(config) << "set -g remain-on-exit on\nset -g status off\n";
  RunResult r = Tmux({"-f", config.string(), "new-session", "-d", "-s", "view", "-x", std::to_string(columns), "-y",
                      std::to_string(rows), "-c", dir.string(), "sh " + script.string()});
  started_ = r.exit_code == 0;
  EXPECT_TRUE(started_) << "tmux new-session failed: " << r.err;
}

TmuxSession::~TmuxSession() { Tmux({"kill-server"}); }

RunResult TmuxSession::Tmux(std::vector<std::string> args) const {
  args.insert(args.begin(), {TmuxBinary(), "-S", socket_});
  Child child(args, {});
  auto r = child.Wait(20);
  return r ? *r : RunResult{};
}

std::vector<std::string> TmuxSession::Screen() const {
  RunResult r = Tmux({"capture-pane", "-p", "-t", "view"});
  std::vector<std::string> lines;
  std::stringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string TmuxSession::ScreenText() const {
  std::string out;
  for (const auto& l : Screen()) out += l + "\n";
  return out;
}

void TmuxSession::Keys(const std::vector<std::string>& keys) const {
  std::vector<std::string> args{"send-keys", "-t", "view"};
  args.insert(args.end(), keys.begin(), keys.end());
  Tmux(args);
}

void TmuxSession::Type(const std::string& text) const { Tmux({"send-keys", "-t", "view", "-l", text}); }

void TmuxSession::Resize(int columns, int rows) const {
  Tmux({"resize-window", "-t", "view", "-x", std::to_string(columns), "-y", std::to_string(rows)});
}

std::string TmuxSession::Format(const std::string& format) const {
  std::string out = Tmux({"display-message", "-p", "-t", "view", format}).out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool TmuxSession::WaitForScreen(const std::function<bool(const std::vector<std::string>&)>& predicate,
                                double timeout_s) const {
  return Eventually([&] { return predicate(Screen()); }, timeout_s);
}

}  // namespace gpulane::test
