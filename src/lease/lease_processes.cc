#include "lease/lease_processes.h"

#include <algorithm>
#include <map>
#include <set>

#include "lease/occupancy.h"

namespace gpulane::lease {

std::vector<pid_t> ProcessesOfLease(const LeaseRecord& lease, const std::vector<ProcEntry>& procs, ProcessTable& table,
                                    const std::string& proc_root) {
  std::set<pid_t> roots;
  std::multimap<pid_t, pid_t> children;
  for (const ProcEntry& p : procs) {
    if (p.uid != lease.uid || p.pid <= 1) continue;
    children.emplace(p.ppid, p.pid);
    if (lease.pgid > 1 && p.pgid == lease.pgid) roots.insert(p.pid);
    else if (lease.ino != 0 && HoldsFileOpen(p.pid, lease.dev, lease.ino, proc_root)) roots.insert(p.pid);
  }
  if (const std::uint32_t anchor = AnchorOf(lease, table); anchor > 1)
    for (const ProcEntry& p : procs)
      if (p.pid == static_cast<pid_t>(anchor) && p.uid == lease.uid) roots.insert(p.pid);
  // Every descendant of those, of the same owner (children are listed only when hers).
  std::set<pid_t> all;
  std::vector<pid_t> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (!all.insert(pid).second) continue;
    auto [from, to] = children.equal_range(pid);
    for (auto it = from; it != to; ++it) todo.push_back(it->second);
  }
  return {all.begin(), all.end()};
}

}  // namespace gpulane::lease
