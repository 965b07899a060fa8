#include "cli/request_options.h"

#include <unistd.h>

#include <chrono>
#include <fmt/format.h>

#include "lease/lease_dir.h"
#include "os/user_groups.h"
#include "sched/partition.h"
#include "sched/user_limits.h"
#include "util/config.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

double WallNowS() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

void RequestOptions::Register(CLI::App* sub, RequestOptionSet set) {
  sub_ = sub;
  set_ = set;
  sub->add_option("-g,-n,--gpu-count,--count", count_,
                  set.zero_gpus ? "How many GPUs (default 1; 0: a CPU-only step, no GPU and no lease, CUDA_VISIBLE_DEVICES empty)"
                                : "How many GPUs (default 1)")
      ->type_name("N");
  sub->add_option("--mem", mem_, "Share GPUs: declare this much GPU memory per GPU (e.g. 30GiB) instead of whole GPUs")
      ->type_name("SIZE");
  sub->add_option("--min-free", min_free_, "Each GPU needs at least this much free memory, e.g. 20GiB")->type_name("SIZE");
  sub->add_option("--max-util", max_util_, "Each GPU at most this busy, in percent")->check(CLI::Range(0, 100))->type_name("PCT");
  sub->add_option("--gpus", gpus_, "Only these GPUs: indices or UUIDs, comma-separated")->type_name("LIST");
  sub->add_flag("--share-foreign", share_foreign_,
                "Allow GPUs that run processes outside gpulane's leases (default: they are taken)");
  sub->add_option("--order", order_,
                  "How to rank the GPUs that qualify: memory (most free first; default for whole GPUs), util (least busy first), "
                  "pci, bestfit (least memory left once placed; default with --mem)")
      ->check(CLI::IsMember({"memory", "util", "pci", "bestfit"}));
  if (set.time_limit)
    sub->add_option("--time-limit", time_limit_, "Stop the job after this long (SIGTERM, then SIGKILL), with a unit: 90m, 4h, 1h30m, 2d (Slurm: --time)")
        ->type_name("DURATION");
  sub->add_option("--partition", partition_,
                  "Only this partition's GPUs, inside its time windows (the machine's [partitions.NAME]; default: sched.default_partition)")
      ->type_name("NAME");
  sub->add_option("--mig", mig_,
                  "One MIG device of this profile (e.g. 1g.18gb; gpulane status lists them) instead of whole GPUs, "
                  "named by its MIG- UUID in CUDA_VISIBLE_DEVICES")
      ->type_name("PROFILE");
  if (set.priority) sub->add_option("--priority", priority_, "Higher runs first (default 0; only admins may go above 0)");
}

Result<sched::Request> RequestOptions::ToRequest() const {
  auto parsed = ParseGiven();
  if (!parsed) return parsed.error();
  sched::Request r = std::move(parsed).value();
  auto given = [&](const char* name) { return sub_->count(name) > 0; };
  // The partition is named, or the default filled in, here, so that the request carries it to
  // the waiter, the daemon and the store; its GPUs are applied once the GPUs are known.
  auto config = LoadConfig();
  if (!config) return config.error();
  // A CPU-only job (-g 0) is in no partition: the default one does not apply (an explicit one is
  // refused by CheckRequest).
  auto partition = sched::SelectPartition(*config, partition_);
  if (!partition) return partition.error();
  if (*partition && (r.count > 0 || given("--partition"))) {
    r.partition = (*partition)->name;
    if (Status s = sched::ApplyPartition(**partition, r, std::nullopt); !s.ok()) return s.error();
  }
  // A submission is stamped by the daemon as it identifies the submitter (daemon/ops/submit.cc): one
  // stamp, by one clock. run, pick and lease are their own submission.
  if (!set_.daemon_identifies) {
    r.user = lease::UserNameOf(r.uid);
    r.submit_time_s = WallNowS();
  }
  // The machine's [limits] for this user (the daemon checks a submission again, as the peer).
  if (sched::AnyLimits(*config)) {
    const LimitsConfig limits = sched::LimitsOf(*config, r.uid, lease::UserNameOf(r.uid), GroupNamesOf(r.uid));
    if (Status s = sched::ApplyTimeLimits(limits, lease::UserNameOf(r.uid), r); !s.ok()) return s.error();
    if (Status s = sched::CheckGpuLimitEver(limits, lease::UserNameOf(r.uid), r.count); !s.ok()) return s.error();
  }
  if (Status s = sched::CheckRequest(r); !s.ok()) return s.error();
  return r;
}

Result<sched::Request> RequestOptions::ToClusterRequest() const {
  auto parsed = ParseGiven();
  if (!parsed) return parsed.error();
  parsed->partition = partition_;  // the cluster's partition, as given ("" = its default)
  parsed->submit_time_s = WallNowS();   // when this machine sent it (the cluster stamps its own)
  return parsed;
}

Result<sched::Request> RequestOptions::ParseGiven() const {
  auto usage = [](std::string m) { return MakeError(ErrorKind::kInvalidArgument, std::move(m)); };
  auto given = [&](const char* name) { return sub_->count(name) > 0; };
  // An empty value ("--mem ''") is an error, not "not given".
  for (const char* name : {"--mem", "--min-free", "--gpus", "--time-limit", "--partition", "--mig"})
    if (sub_->get_option_no_throw(name) && given(name) && sub_->get_option(name)->as<std::string>().empty())
      return usage(fmt::format("{} '': give a value", name));
  sched::Request r;
  if (count_ < 0) return usage(fmt::format("-g {}: ask for 0 GPUs or more", count_));
  if (count_ == 0 && !set_.zero_gpus)
    return usage("-g 0: ask for at least 1 GPU (gpulane run -g 0 and submit -g 0 run a command without GPUs)");
  r.count = static_cast<unsigned>(count_);
  if (given("--mem")) {
    auto bytes = ParseSizeBytes(mem_);
    if (!bytes) return usage("--mem: " + bytes.error().message);
    r.mem_bytes = *bytes;
  }
  if (given("--min-free")) {
    auto bytes = ParseSizeBytes(min_free_);
    if (!bytes) return usage("--min-free: " + bytes.error().message);
    r.min_free_bytes = *bytes;
  }
  if (max_util_ >= 0) r.max_util_pct = static_cast<unsigned>(max_util_);
  r.gpu_list = gpus_;
  r.mig_profile = mig_;
  r.share_foreign = share_foreign_;
  if (given("--order")) r.order = sched::ParseOrder(order_);  // not given: the default (sched::DefaultOrder)
  if (sub_->get_option_no_throw("--time-limit") && given("--time-limit")) {
    auto s = ParseDurationS(time_limit_, "m");
    if (!s) return usage("--time-limit: " + s.error().message);
    r.time_limit_s = *s;
  }
  r.priority = priority_;
  r.uid = static_cast<std::uint32_t>(getuid());
  return r;
}

}  // namespace gpulane::cli
