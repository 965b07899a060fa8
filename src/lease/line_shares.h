#pragma once
// The lease line's order with fair share: the system daemon publishes each user's fair-share
// factor (sched/fairshare.h LineShares) as one file in the lease directory, and every reader of
// the directory orders the waiting tickets by it, so that `gpulane run`'s requests and queued
// jobs' supervisors wait in the order the daemon's own queue uses.
//
// Trust (lease/lease_dir.h, threat model): the file counts only when it is a regular file owned by
// the directory's owner and writable by nobody else. The directory's owner (root for
// /run/gpulane/leases) can already remove or rename any file in it, so trusting her order gives
// her nothing she could not take. A file older than kLineSharesStaleS (its daemon has stopped) is
// ignored: the line falls back to submission order.
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "lease/records.h"
#include "sched/fairshare.h"

namespace gpulane::lease {

/// The file's name in the lease directory (neither ".lease" nor ".wait": no lease, no ticket).
inline constexpr const char* kLineSharesFile = "fair-share.json";
/// The daemon writes the file whenever a factor changes and at least this often (seconds).
inline constexpr double kLineSharesRefreshS = 60;
/// A file not rewritten for this long (seconds) is ignored: its daemon is gone.
inline constexpr double kLineSharesStaleS = 300;

/// {"written_s", "weight_fair_share", "weight_age", "max_age_s", "factors": {"alice": 0.25}}.
nlohmann::json LineSharesToJson(const sched::LineShares& shares);
/// The inverse; nullopt when a field is missing, of the wrong type, negative, not finite, or a
/// factor outside [0, 1] (a damaged file orders nothing).
std::optional<sched::LineShares> LineSharesFromJson(const nlohmann::json& j);

/// Whether `shares`, written at shares.written_s, still count at `now_s` (not older than
/// kLineSharesStaleS, nor written more than a minute in the future).
bool LineSharesFresh(const sched::LineShares& shares, double now_s);

/// Whether `a` and `b` would order the line differently enough to publish again: other weights,
/// other users, or a factor that moved by more than `tolerance`.
bool LineSharesDiffer(const sched::LineShares& a, const sched::LineShares& b, double tolerance = 1e-3);

/// True when `a` stands before `b` at `now_s` (seconds since the epoch), by the one line order
/// (sched/line_order.h over TicketKey): higher --priority first; then, with `shares`, higher
/// sched::LinePriority (its user's factor and the ticket's age, from its seq); then earlier seq,
/// then id. Without shares: LineOrder.
bool LineBefore(const TicketRecord& a, const TicketRecord& b, const sched::LineShares* shares, double now_s);

/// Sorts `tickets` into line order (LineBefore). Each ticket's priority is computed once, so the
/// order is a strict weak ordering whatever the floating point does.
void SortLine(std::vector<TicketRecord>& tickets, const sched::LineShares* shares, double now_s);

}  // namespace gpulane::lease
