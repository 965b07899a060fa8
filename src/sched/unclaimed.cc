#include "sched/unclaimed.h"

#include <algorithm>

namespace gpulane::sched {

std::vector<std::size_t> ClaimOrder(const LineMemory& watch, std::span<const ClaimKey> line) {
  std::vector<std::size_t> order, last;
  for (std::size_t i = 0; i < line.size(); ++i) (watch.demoted.count(line[i]) ? last : order).push_back(i);
  order.insert(order.end(), last.begin(), last.end());
  return order;
}

Request Demoted(Request r) {
  if (r.preemptible == Preemptible::kNo) r.preemptible = Preemptible::kRequeue;
  r.preemptions = std::max(r.preemptions, 1u);
  return r;
}

ClaimNotes NoteGrants(LineMemory& watch, std::span<const ClaimKey> line, const std::vector<bool>& granted,
                      std::optional<std::size_t> self, double now_s, double max_unclaimed_s) {
  ClaimNotes notes;
  std::map<ClaimKey, double> since;
  std::set<ClaimKey> demoted;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const ClaimKey& key = line[i];
    if (watch.demoted.count(key)) {
      demoted.insert(key);
      continue;
    }
    if (self == i || i >= granted.size() || !granted[i]) continue;  // not granted now: from zero next time
    auto seen = watch.granted_since_s.find(key);
    const double first = seen == watch.granted_since_s.end() ? now_s : seen->second;
    if (now_s - first >= max_unclaimed_s) {
      demoted.insert(key);
      notes.newly_demoted.push_back(i);
      continue;
    }
    since[key] = first;
    const double at = first + max_unclaimed_s;
    notes.recheck_at_s = notes.recheck_at_s ? std::min(*notes.recheck_at_s, at) : at;
  }
  watch.granted_since_s = std::move(since);
  watch.demoted = std::move(demoted);
  return notes;
}

}  // namespace gpulane::sched
