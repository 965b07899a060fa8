#pragma once
// The CLI's side of the daemon protocol: find the daemon, send one request, read the reply.
//
// Which daemon: when a system daemon is installed (daemon::SystemDaemonInstalled, or
// GPULANE_SOCKET names /run/gpulane/gpulane.sock), only the system one, waited for up to
// SystemDaemonWaitS() while it restarts; a per-user daemon is never started. Otherwise the
// system socket, then the user's own. When neither answers, CallOrStart (submit) starts the per-user
// daemon; the other calls start it again only when its state still holds jobs (a crash, a reboot,
// `gpulane daemon stop`: its queue resumes and its jobs are never reported missing; docs/user-daemon.md).
//
// Nothing is sent before the answering process is known to be root or the caller
// (proto::CheckDaemonPeer), and a socket in the shared /tmp only inside the caller's own private
// folder (daemon::SecureUserPaths): else the call fails with kUnsafe (exit 7).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace gpulane::cli {

/// How long, in seconds, a command waits for an installed system daemon that does not answer
/// (a restart: the unit's RestartSec=2 plus start-up) before it fails.
inline constexpr double kSystemDaemonWaitS = 5;

/// kSystemDaemonWaitS, or $GPULANE_SYSTEM_DAEMON_WAIT (a duration: "5", "200ms"; tests).
/// Errors: kInvalidArgument when the variable is not a duration.
Result<double> SystemDaemonWaitS();

/// Sends `request` (op and fields; "v" is added) to the daemon and returns its successful reply,
/// starting the per-user daemon when none answers and no system daemon is installed: for commands
/// that create work (submit) only. An error reply becomes an Error of the kind its "code" names.
/// `timeout_s`: how long to wait for the reply, < 0 forever. Errors: kUnavailable when the system
/// daemon does not answer within SystemDaemonWaitS() or a per-user one cannot be started;
/// kInvalidArgument for a bad config file or GPULANE_SYSTEM_DAEMON(_WAIT) value; kIo when the
/// daemon goes away mid-call; kUnsafe when another user's process answers, or /tmp/gpulane-<uid>
/// is not the caller's private folder.
Result<nlohmann::json> CallOrStart(nlohmann::json request, double timeout_s = 30);

/// What a call does when no daemon answers and no system daemon is installed.
enum class IfDown {
  /// Start the user's own daemon again when its state (jobs.db) holds any job, or cannot be read
  /// (the daemon's start says why); nullopt only when it holds none. For commands about jobs.
  kStartWithJobs,
  /// Start nothing: nullopt (doctor, shell completion, `daemon status`/`stop`).
  kStartNone,
};

/// Like CallOrStart, but starts the per-user daemon only as `if_down` says: for commands that read
/// or wait for existing jobs. nullopt when no daemon answers, none is installed and none was
/// started (with kStartWithJobs: the user's state holds no job, so no job exists); an installed
/// system daemon is waited for as in CallOrStart, then kUnavailable. With `error_replies`, an
/// error reply ("ok": false) is returned as it came instead of as an Error: for commands over
/// several jobs, whose replies say job by job what failed ("failed"). Errors: CallOrStart's.
Result<std::optional<nlohmann::json>> CallIfRunning(nlohmann::json request, double timeout_s = 30,
                                                    bool error_replies = false, IfDown if_down = IfDown::kStartWithJobs);

/// Receives the text of a streamed reply part by part, as it arrives; an error ends the call.
using TextSink = std::function<Status(std::string_view)>;

/// CallIfRunning for a request with "stream" (docs/protocol.md "Streamed replies"): sends it,
/// hands every part of the reply's text to `sink` and returns the reply's first frame (the header)
/// once the closing empty frame came. `timeout_s`: for each frame. A daemon older than streamed
/// replies answers in one frame as if "stream" were not there: that reply is returned (without
/// "stream") and `sink` is not called. Errors: as CallIfRunning, and `sink`'s.
Result<std::optional<nlohmann::json>> StreamIfRunning(nlohmann::json request, const TextSink& sink, double timeout_s = 30);

/// The error for job `id` ("12", "12_3") when no daemon runs, none is installed and the user's
/// state holds no job: kNotFound, "no job <id>" with why (no daemon, so nothing is queued).
Error NoJobWithoutDaemon(const std::string& id);
/// The same for `what` ("no queued or running job matches --name x").
Error NothingWithoutDaemon(const std::string& what);

}  // namespace gpulane::cli
