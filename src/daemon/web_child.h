#pragma once
// The daemon's gpulane-web ([web] listen, docs/config.md "Web"): started next to the daemon's own
// binary, as nobody for the system daemon (groups, gid and uid dropped before the exec) or as
// the daemon's user for a per-user one, restarted with back-off when it dies, stopped at exit.
// The daemon parses no HTTP itself: gpulane-web is a client of its socket like the CLI.
#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "daemon/paths.h"
#include "os/env.h"
#include "util/clock.h"
#include "util/config.h"

namespace gpulane::daemon {

/// How to start gpulane-web.
struct WebChildSpec {
  std::string exe;                ///< gpulane-web's path
  std::vector<std::string> argv;  ///< its arguments, argv[0] included
  bool drop_privileges = false;   ///< run as `uid`/`gid` with no supplementary groups
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<int> close_in_child;  ///< the daemon's descriptors closed before the exec (its lock)
  /// Adds `--ready-fd 3` and reads from it the URL gpulane-web listens on once it has bound its
  /// port (a port of 0 is the kernel's choice: only the child knows which).
  bool ask_url = false;
};

class WebChild {
 public:
  /// `log` writes a line to the daemon's log.
  /// `env`'s clock times Stop's wait for the child; its spawner starts it.
  WebChild(WebChildSpec spec, const os::Env& env, std::function<void(const std::string&)> log);
  /// Stop().
  ~WebChild();
  WebChild(const WebChild&) = delete;
  WebChild& operator=(const WebChild&) = delete;

  /// Starts it now (at monotonic `now_s`); a failed fork is logged and retried by Tick.
  void Start(double now_s);
  /// The daemon reaped child `pid` with wait status `status` at `now_s`: when it is gpulane-web,
  /// its end is logged and a restart planned after the back-off (1 s, doubling to 60 s; back to 1 s
  /// after a run of 60 s or more).
  void Reaped(pid_t pid, int status, double now_s);
  /// Restarts it when a restart is due.
  void Tick(double now_s);
  /// SIGTERM, up to 2 s for it to end, then SIGKILL; reaps it.
  void Stop();
  /// Its pid; -1 while none runs.
  pid_t pid() const { return pid_; }
  /// Where the running gpulane-web listens ("http://127.0.0.1:41235/"), as it said once bound; ""
  /// while none runs or it has not said yet. Never blocks.
  std::string Url();
  /// The [web] listen address it was started with ("127.0.0.1:0").
  const std::string& listen() const { return listen_; }

 private:
  void CloseUrlPipe();

  std::string listen_;
  int url_fd_ = -1;        ///< the read end of the running child's --ready-fd, non-blocking
  std::string url_read_;   ///< what came through it so far
  WebChildSpec spec_;
  const Clock& clock_;
  os::Spawner& spawner_;
  std::function<void(const std::string&)> log_;
  pid_t pid_ = -1;
  double started_s_ = 0;
  double backoff_s_ = 1;
  double restart_at_s_ = -1;  ///< < 0: no restart planned
};

/// What `ping` says of a daemon's gpulane-web `web` (nullptr: none, docs/protocol.md): {"state":
/// "off"} (web.listen "off", or gpulane-web cannot be run: the log says why), {"state": "listening",
/// "url"}, or {"state": "starting", "listen"} (started, or to be restarted, and not listening yet).
nlohmann::json WebInfo(WebChild* web);

/// The gpulane-web of a daemon with `config` on `paths`, whose own binary is `self_exe`, on
/// WebListenFor (a per-user daemon: a port of its own); nullptr (logged)
/// when that is "off", gpulane-web is not next to `self_exe`, or the system daemon's user "nobody"
/// does not exist. Not started yet.
std::unique_ptr<WebChild> MakeWebChild(const Config& config, const DaemonPaths& paths, const std::string& self_exe,
                                       std::vector<int> close_in_child, const os::Env& env,
                                       std::function<void(const std::string&)> log);

}  // namespace gpulane::daemon
