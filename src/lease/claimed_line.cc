#include "lease/claimed_line.h"

#include "sched/reserve_idle.h"

namespace gpulane::lease {
namespace {

// Schedule with the tickets in ClaimOrder: decisions mapped back to the tickets' own order.
LineDecision DecideOnce(const Occupancy& occupancy, const std::vector<sched::Request>& requests,
                        const std::vector<sched::ClaimKey>& keys, const sched::Limits& limits,
                        const sched::LineMemory& watch) {
  LineDecision out;
  out.order = sched::ClaimOrder(watch, keys);
  std::vector<sched::Request> line;
  line.reserve(requests.size());
  for (std::size_t i : out.order)
    line.push_back(watch.demoted.count(keys[i]) ? sched::Demoted(requests[i]) : requests[i]);
  std::vector<sched::Decision> decided = sched::Schedule(occupancy.gpus, line, limits, occupancy.mig_units);
  out.decisions.resize(requests.size());
  for (std::size_t k = 0; k < out.order.size() && k < decided.size(); ++k) out.decisions[out.order[k]] = std::move(decided[k]);
  return out;
}

std::vector<bool> Granted(const LineDecision& d) {
  std::vector<bool> granted;
  granted.reserve(d.decisions.size());
  for (const sched::Decision& x : d.decisions) granted.push_back(x.granted);
  return granted;
}

}  // namespace

LineDecision DecideLine(const Occupancy& occupancy, const std::vector<TicketRecord>& tickets, const sched::Limits& limits,
                        sched::LineMemory& watch, std::optional<std::size_t> self, double now_s,
                        double max_unclaimed_s) {
  const std::vector<sched::Request> requests = LineOf(tickets, occupancy.gpus);
  // Each user's hold of idle GPUs, across her tickets (sched/reserve_idle.h).
  sched::Limits with_clocks = limits;
  with_clocks.idle_hold_since_by_uid = sched::IdleHoldClocks(watch);
  std::vector<sched::ClaimKey> keys;
  keys.reserve(tickets.size());
  for (const TicketRecord& t : tickets) keys.emplace_back(t.dev, t.ino);
  LineDecision out = DecideOnce(occupancy, requests, keys, with_clocks, watch);
  sched::ClaimNotes notes = sched::NoteGrants(watch, keys, Granted(out), self, now_s, max_unclaimed_s);
  if (!notes.newly_demoted.empty()) {  // a ticket just lost its place: the line behind it moves up
    out = DecideOnce(occupancy, requests, keys, with_clocks, watch);
    notes = sched::NoteGrants(watch, keys, Granted(out), self, now_s, max_unclaimed_s);
  }
  out.recheck_at_s = notes.recheck_at_s;
  std::vector<std::uint32_t> uids;
  uids.reserve(tickets.size());
  for (const sched::Request& r : requests) uids.push_back(r.uid);
  sched::NoteIdleHolds(watch, uids, out.decisions, now_s, limits.max_reserve_idle_s);
  return out;
}

}  // namespace gpulane::lease
