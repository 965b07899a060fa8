#include "daemon/settings.h"

#include <cstdlib>
#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::daemon {
namespace {

// Reads variable `name` into *out when set, within [min_s, max_s].
Status ReadSeconds(const EnvLookup& getenv, const char* name, double min_s, double max_s, double* out) {
  const char* text = getenv(name);
  if (!text) return Status::Ok();
  auto value = ParseDurationS(text);
  if (!value || !(*value >= min_s && *value <= max_s))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("{}={}: give a duration from {:g} s to {:g} s (e.g. 500ms, 2s)", name, text, min_s, max_s));
  *out = *value;
  return Status::Ok();
}

}  // namespace

Result<DaemonSettings> SettingsFromEnvironment(const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* name) -> const char* { return std::getenv(name); });
  DaemonSettings s;
  for (Status status : {ReadSeconds(env, "GPULANE_DAEMON_REQUEUE_GRACE", kMinRequeueGraceS, kMaxRequeueGraceS, &s.requeue_grace_s),
                        ReadSeconds(env, "GPULANE_DAEMON_READ_TIMEOUT", kMinReadTimeoutS, kMaxReadTimeoutS, &s.read_timeout_s),
                        ReadSeconds(env, "GPULANE_DAEMON_TICK", kMinTickS, kMaxTickS, &s.tick_s)})
    if (!status.ok()) return status.error();
  return s;
}

}  // namespace gpulane::daemon
