#include "sched/line_order.h"

namespace gpulane::sched {

bool LineBefore(const LineKey& a, const LineKey& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.line_priority != b.line_priority) return a.line_priority > b.line_priority;
  if (a.arrival != b.arrival) return a.arrival < b.arrival;
  return a.name < b.name;
}

}  // namespace gpulane::sched
