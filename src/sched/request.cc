#include "sched/request.h"

#include <algorithm>
#include <cmath>

#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sched {

const char* OrderName(Order order) {
  switch (order) {
    case Order::kMostFree: return "memory";
    case Order::kLeastUtil: return "util";
    case Order::kPci: return "pci";
    case Order::kBestFit: return "bestfit";
  }
  return "memory";
}

std::optional<Order> ParseOrder(const std::string& name) {
  for (Order o : {Order::kMostFree, Order::kLeastUtil, Order::kPci, Order::kBestFit})
    if (name == OrderName(o)) return o;
  return std::nullopt;
}

const char* PreemptibleName(Preemptible p) {
  switch (p) {
    case Preemptible::kNo: return "no";
    case Preemptible::kRequeue: return "requeue";
    case Preemptible::kCancel: return "cancel";
  }
  return "no";
}

std::optional<Preemptible> ParsePreemptible(const std::string& name) {
  for (Preemptible p : {Preemptible::kNo, Preemptible::kRequeue, Preemptible::kCancel})
    if (name == PreemptibleName(p)) return p;
  return std::nullopt;
}

Order DefaultOrder(const Request& r) { return r.mem_bytes ? Order::kBestFit : Order::kMostFree; }

Order EffectiveOrder(const Request& r) { return r.order.value_or(DefaultOrder(r)); }

Status CheckRequest(const Request& r) {
  auto bad = [](std::string message) { return Status(MakeError(ErrorKind::kInvalidArgument, std::move(message))); };
  if (r.count == 0) {  // a CPU-only job: no GPU, no lease, no place in the GPUs' line
    if (r.mem_bytes || r.min_free_bytes || r.max_util_pct || !r.gpu_list.empty() || !r.mig_profile.empty())
      return bad("-g 0 with --mem, --min-free, --max-util, --gpus or --mig: a job with -g 0 takes no GPU; leave those "
                 "out, or ask for at least 1 GPU");
    if (!r.partition.empty())
      return bad(StrCat("-g 0 --partition ", r.partition, ": a job with -g 0 takes no GPU, so no partition; leave "
                        "--partition out"));
    if (r.preemptible != Preemptible::kNo)
      return bad("-g 0 --preemptible: a job with -g 0 holds no GPU to give way with; leave --preemptible out");
  }
  if (r.count > kMaxGpuCount) return bad(StrCat("-g ", r.count, ": at most ", kMaxGpuCount, " GPUs per job"));
  if (r.mem_bytes && *r.mem_bytes == 0) return bad("--mem 0: declare the GPU memory the job needs, e.g. --mem 30GiB");
  if (r.mem_bytes && *r.mem_bytes > kMaxMemBytes)
    return bad(StrCat("--mem ", FormatBytes(*r.mem_bytes), ": more than any GPU has; declare what the job needs"));
  if (r.min_free_bytes && *r.min_free_bytes > kMaxMemBytes)
    return bad(StrCat("--min-free ", FormatBytes(*r.min_free_bytes), ": more than any GPU has"));
  if (r.max_util_pct && *r.max_util_pct > 100) return bad(StrCat("--max-util ", *r.max_util_pct, ": give 0 to 100 (percent)"));
  if (r.priority > kMaxPriority || r.priority < -kMaxPriority)
    return bad(StrCat("--priority ", r.priority, ": give a number between -", kMaxPriority, " and ", kMaxPriority));
  if (r.time_limit_s && !(*r.time_limit_s > 0)) return bad("--time-limit: must be positive, e.g. 4h");
  if (r.time_limit_s && !(*r.time_limit_s <= kMaxTimeLimitS))
    return bad(StrCat("--time-limit: at most 366 days (", static_cast<long long>(kMaxTimeLimitS), " s)"));
  if (!std::isfinite(r.submit_time_s) || r.submit_time_s < 0) return bad("submission time out of range");
  if (r.allowed_uuids && r.allowed_uuids->size() > kMaxGpuCount) return bad("--gpus: too many GPUs named");
  if (!r.mig_profile.empty()) {
    const bool name_ok = r.mig_profile.size() <= kMaxMigProfileChars &&
                         std::all_of(r.mig_profile.begin(), r.mig_profile.end(), [](char ch) {
                           return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '+';
                         });
    if (!name_ok) return bad("--mig: give a MIG profile such as 1g.18gb (gpulane status lists this machine's)");
    if (r.count != 1)
      return bad(StrCat("-g ", r.count, " --mig: CUDA uses only one MIG device per process; ask for -g 1 (an array "
                        "of jobs for more)"));
    if (r.mem_bytes || r.min_free_bytes || r.max_util_pct)
      return bad("--mig with --mem, --min-free or --max-util: a MIG device is leased whole; leave those out");
  }
  return Status::Ok();
}

bool Allows(const Request& r, const std::string& uuid) {
  if (!r.allowed_uuids) return true;
  return std::find(r.allowed_uuids->begin(), r.allowed_uuids->end(), uuid) != r.allowed_uuids->end();
}

}  // namespace gpulane::sched
