#include "daemon/settings.h"

#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::daemon {
namespace {

// Reads variable `name` into *out when set, within [min_s, max_s].
Status ReadSeconds(const EnvLookup& getenv, const char* name, double min_s, double max_s, double* out) {
  const char* text = getenv(name);
  if (!text) return Status::Ok();
  auto value = ParseDurationOrSecondsS(text);
  if (!value || !(*value >= min_s && *value <= max_s))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("{}={}: give a duration from {:g} s to {:g} s (e.g. 500ms, 2s)", name, text, min_s, max_s));
  *out = *value;
  return Status::Ok();
}

// Reads count variable `name` into *out when set, within [min, max].
Status ReadCount(const EnvLookup& getenv, const char* name, std::size_t min, std::size_t max, std::size_t* out) {
  const char* text = getenv(name);
  if (!text) return Status::Ok();
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno || end == text || *end || text[0] == '-' || value < min || value > max)
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("{}={}: give a whole number from {} to {}", name, text, min, max));
  *out = static_cast<std::size_t>(value);
  return Status::Ok();
}

// Reads size variable `name` (bytes, as "64MiB") into *out when set, within [min, max].
Status ReadBytes(const EnvLookup& getenv, const char* name, std::size_t min, std::size_t max, std::size_t* out) {
  const char* text = getenv(name);
  if (!text) return Status::Ok();
  auto value = ParseSizeBytes(text);
  if (!value || *value < min || *value > max)
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("{}={}: give a size from {} to {} (e.g. 64MiB)", name, text,
                                                              FormatBytes(min), FormatBytes(max)));
  *out = static_cast<std::size_t>(*value);
  return Status::Ok();
}

}  // namespace

Result<DaemonSettings> SettingsFromEnvironment(const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* name) -> const char* { return std::getenv(name); });
  DaemonSettings s;
  for (Status status : {ReadSeconds(env, "GPULANE_DAEMON_REQUEUE_GRACE", kMinRequeueGraceS, kMaxRequeueGraceS, &s.requeue_grace_s),
                        ReadSeconds(env, "GPULANE_DAEMON_READ_TIMEOUT", kMinReadTimeoutS, kMaxReadTimeoutS, &s.read_timeout_s),
                        ReadSeconds(env, "GPULANE_DAEMON_TICK", kMinTickS, kMaxTickS, &s.tick_s),
                        ReadSeconds(env, "GPULANE_DAEMON_IDLE_TIMEOUT", kMinIdleTimeoutS, kMaxIdleTimeoutS, &s.idle_timeout_s),
                        ReadSeconds(env, "GPULANE_DAEMON_STORE_BUSY_TIMEOUT", kMinStoreBusyTimeoutS, kMaxStoreBusyTimeoutS,
                                    &s.store_busy_timeout_s),
                        ReadSeconds(env, "GPULANE_DAEMON_LOAD_BEFORE_LISTEN", kMinLoadBeforeListenS, kMaxLoadBeforeListenS,
                                    &s.load_before_listen_s),
                        ReadCount(env, "GPULANE_DAEMON_MAX_CONNECTIONS", kMinConnections, kMaxConnections, &s.max_connections),
                        ReadCount(env, "GPULANE_DAEMON_MAX_CONNECTIONS_PER_UID", kMinConnections, kMaxConnections,
                                  &s.max_connections_per_uid),
                        ReadCount(env, "GPULANE_DAEMON_LOAD_PART_ROWS", kMinLoadPartRows, kMaxLoadPartRows, &s.load_part_rows),
                        ReadBytes(env, "GPULANE_DAEMON_PARTIAL_BUDGET", kMinPartialBudgetBytes, kMaxPartialBudgetBytes,
                                  &s.partial_budget_bytes)})
    if (!status.ok()) return status.error();
  return s;
}

}  // namespace gpulane::daemon
