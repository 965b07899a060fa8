// gpulane top: a live full-screen view of the GPUs, their processes and the queue (issue 11,
// item 7). The model comes from cli/top_source, the screen from render/top_view, keys from
// render/top_keys; this file is the loop: poll() on the keys, the signals and the refresh timer,
// so nothing runs between refreshes but what a key or a resize asks for.
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/status_watch.h"
#include "cli/top_source.h"
#include "cli/top_terminal.h"
#include "render/top_keys.h"
#include "util/exit_codes.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

/// Seconds of history the sparklines cover.
constexpr double kSpanS = 300;

struct TopOptions {
  std::string interval = "1";
  std::string color = "auto";
  long iterations = 0;
};

double WallS() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double MonotonicS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The view's state between events: the last model, what the keys chose, how to draw.
struct View {
  TopSource source;
  TopModel model;
  TopUi ui;
  TopStyle style;
  double interval_s = 1;
  std::unique_ptr<TopTerminal> terminal;

  bool Draw() {
    const TerminalSize size = terminal->Size();
    return terminal->Draw(RenderTop(model, ui, style, size.columns, size.rows));
  }

  // New readings; when they cannot be read, the last ones stay with a note saying why.
  void Refresh() {
    auto fresh = source.Refresh(WallS());
    if (fresh) model = std::move(fresh).value();
    else model.notes.assign(1, "cannot read the GPUs now: " + fresh.error().message);
    model.refresh_s = interval_s;
  }
};

// Handles what poll() found: true to go on, false to quit.
bool HandleEvents(View& v, const pollfd* fds, bool& redraw) {
  if (fds[0].revents & POLLIN) {
    switch (v.terminal->TakeSignal()) {
      case TerminalEvent::kQuit: return false;
      case TerminalEvent::kResized:
      case TerminalEvent::kResumed: redraw = true; break;
      case TerminalEvent::kNone: break;
    }
  }
  if (v.terminal->has_keys() && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
    const std::string bytes = v.terminal->ReadKeys();
    for (const TopKey& key : DecodeTopKeys(bytes)) {
      const TopAction action = ApplyTopKey(v.ui, key);
      if (action == TopAction::kQuit) return false;
      redraw |= action == TopAction::kRedraw;
    }
  }
  return true;
}

int Loop(View& v, double interval_s, long iterations) {
  double next_s = MonotonicS() + interval_s;
  long drawn = 1;  // the first model was drawn before the loop
  while (iterations == 0 || drawn < iterations) {
    pollfd fds[2] = {{v.terminal->signal_fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    const double wait_s = std::max(0.0, next_s - MonotonicS());
    const int n = poll(fds, v.terminal->has_keys() ? 2 : 1, static_cast<int>(std::ceil(wait_s * 1000)));
    bool redraw = false;
    if (n > 0 && !HandleEvents(v, fds, redraw)) break;
    if (MonotonicS() >= next_s) {
      v.Refresh();
      ++drawn;
      redraw = true;
      next_s = std::max(next_s + interval_s, MonotonicS());
    }
    if (redraw && !v.Draw()) break;  // the terminal is gone
  }
  return kExitOk;
}

int RunTop(const TopOptions& o, const os::Env& env) {
  auto interval = ParseDurationOrSecondsS(o.interval);
  if (!interval || *interval < 0.1 || *interval > 3600)
    return Fail(MakeError(ErrorKind::kInvalidArgument,
                          fmt::format("--interval '{}': give the refresh interval in seconds, from 0.1 to 3600 (e.g. --interval 2)",
                                      o.interval)));
  if (o.iterations < 0)
    return Fail(MakeError(ErrorKind::kInvalidArgument,
                          fmt::format("--iterations {}: give how many refreshes to show, 1 or more (0: until q)", o.iterations)));
  // Without a terminal there is no screen to draw on: status --watch's frames, one after the other.
  if (isatty(STDOUT_FILENO) != 1) return WatchStatus(*interval, o.iterations, o.color, env);
  auto backend = OpenBackend(env);
  if (!backend) return Fail(backend.error());
  View v{TopSource(std::move(backend).value(), kSpanS, env.clock), {}, {}, {UseColor(o.color), LocaleIsUtf8()}, *interval, nullptr};
  auto first = v.source.Refresh(WallS());  // before the screen is taken: errors go to stderr as they are
  if (!first) return Fail(first.error());
  v.model = std::move(first).value();
  v.model.refresh_s = v.interval_s;
  auto terminal = TopTerminal::Enter();
  if (!terminal) return Fail(terminal.error());
  v.terminal = std::move(terminal).value();
  if (!v.Draw()) return kExitOk;
  const int code = Loop(v, *interval, o.iterations);
  v.terminal->Leave();
  return code;
}

}  // namespace

void RegisterTop(CLI::App& app, Runner* run, const os::Env& env) {
  auto o = std::make_shared<TopOptions>();
  CLI::App* sub = app.add_subcommand("top", "A live full-screen view of the GPUs, their processes and the queue");
  sub->add_option("--interval", o->interval, "Refresh every SECONDS (default 1, at least 0.1)")->type_name("SECONDS");
  sub->add_option("--color", o->color, "Colour: auto (a terminal without NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  sub->add_option("-n,--iterations", o->iterations, "Stop after N refreshes (default 0: until q or Ctrl-C)")->type_name("N");
  sub->footer("Keys: q quit; sort processes by g GPU, m memory, u utilisation, n user, p pid; r reverse; f or / "
              "filter by user (Enter applies, empty for everyone; Esc clears). Without a terminal on stdout it prints "
              "`gpulane status` every interval instead.");
  sub->callback([o, run, &env] { *run = [o, &env] { return RunTop(*o, env); }; });
}

}  // namespace gpulane::cli
