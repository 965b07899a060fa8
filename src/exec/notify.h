#pragma once
// Notifications without code changes (issue 11, item 4): when a job ends, fails or has an anomaly,
// a webhook is posted (Slack-, Discord- and ntfy-compatible) and/or a command is run, as the job's
// user, with the event in environment variables (as task-spooler's and pueue's callbacks). Delivery
// is a detached process of its own that retries and gives up: nothing waits for it, so a failing
// destination never delays the job's end, the next job or the daemon.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "os/spawn.h"
#include "os/user_file.h"
#include "util/notify_target.h"
#include "util/result.h"

namespace gpulane::exec {

/// One thing to tell.
struct NotifyEvent {
  std::string event;     ///< "end", "fail" or "anomaly"
  std::string job_id;    ///< "12", "12_3", "r4121"
  std::string name;      ///< the job's name ("" when none)
  std::string user;
  std::string state;     ///< "completed", "failed", "timeout", "cancelled"; "running" for an anomaly
  std::optional<int> exit_code;
  std::string message;   ///< one line: what happened ("job 12 (train) of alice failed with exit code 1")
  std::string log_tail;  ///< the last lines of the job's log (at most kLogTailBytes)
};

inline constexpr std::size_t kLogTailBytes = 4096;

/// The webhook's body for `format`.
std::string WebhookBody(const NotifyEvent& e, const std::string& format);

/// The environment the command gets on top of the job's: GPULANE_EVENT, GPULANE_JOB_ID,
/// GPULANE_JOB_NAME, GPULANE_JOB_USER, GPULANE_JOB_STATE, GPULANE_EXIT_CODE (when known),
/// GPULANE_MESSAGE, GPULANE_LOG_TAIL.
std::vector<std::string> CommandEnvironment(const NotifyEvent& e);

/// The last lines of the job's log `path`, at most kLogTailBytes, from a whole line on; "" when it
/// is not a regular file of `owner` (when given) that `as` may read (os::ReadTailAsUser: a log
/// swapped for a symlink, a FIFO or a device gives nothing, and never blocks).
std::string LogTail(const std::string& path, std::optional<os::FileUser> as, std::optional<std::uint32_t> owner);

/// Sends `e` to `target` from a process started detached by `spawner` and returns at once. As root, that process becomes
/// `uid`/`gid` (with the user's groups) before anything else. The webhook goes through curl
/// (--fail, 10 s a try, 3 tries 2 s and 10 s apart); the command runs once with `env` plus
/// CommandEnvironment. Failures are written to the caller's stderr (a supervisor's log).
/// Errors: kIo when the process cannot be started.
Status SendDetached(os::Spawner& spawner, const NotifyTarget& target, const NotifyEvent& e, std::optional<uid_t> uid, std::optional<gid_t> gid,
                    const std::vector<std::string>& env);

}  // namespace gpulane::exec
