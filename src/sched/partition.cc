#include "sched/partition.h"

#include <algorithm>
#include <bitset>
#include <cmath>
#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sched {
namespace {

using WeekMask = std::bitset<kMinutesPerWeek>;

// The minutes of the week the partition is open (all of them without windows).
WeekMask OpenMinutes(const PartitionConfig& p) {
  WeekMask open;
  if (p.windows.empty()) return open.set();
  for (const WeekWindow& w : p.windows) {
    const unsigned days = (w.last_day + 7 - w.first_day) % 7 + 1;
    const unsigned length = w.end_min > w.start_min ? w.end_min - w.start_min : kMinutesPerDay - w.start_min + w.end_min;
    for (unsigned i = 0; i < days; ++i) {
      const unsigned begin = ((w.first_day + i) % 7) * kMinutesPerDay + w.start_min;
      for (unsigned m = 0; m < length; ++m) open.set((begin + m) % kMinutesPerWeek);
    }
  }
  return open;
}

// The week time in [0, kSecondsPerWeek), whatever the caller passed.
double Normalise(double week_s) {
  double t = std::fmod(week_s, kSecondsPerWeek);
  if (t < 0) t += kSecondsPerWeek;
  return t;
}

unsigned MinuteOf(double week_s) { return static_cast<unsigned>(Normalise(week_s) / 60) % kMinutesPerWeek; }

std::string ClockText(double week_s) {
  const unsigned minute = MinuteOf(week_s) % kMinutesPerDay;
  const unsigned h = minute / 60, m = minute % 60;
  return StrCat(h < 10 ? "0" : "", h, ":", m < 10 ? "0" : "", m);
}

// "0-1", "0,2", "GPU-ab..": the configured GPUs, consecutive indices as ranges.
std::string GpusText(const PartitionConfig& p) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < p.gpus.size();) {
    std::size_t j = i;
    auto index = [&](std::size_t k) { return std::all_of(p.gpus[k].begin(), p.gpus[k].end(), ::isdigit) ? std::stol(p.gpus[k]) : -2; };
    while (index(i) >= 0 && j + 1 < p.gpus.size() && index(j + 1) == index(j) + 1) ++j;
    parts.push_back(j > i + 0 ? StrCat(p.gpus[i], "-", p.gpus[j]) : p.gpus[i]);
    i = j + 1;
  }
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : ",") + part;
  return out;
}

}  // namespace

bool IsOpen(const PartitionConfig& partition, double week_s) {
  if (partition.windows.empty()) return true;
  return OpenMinutes(partition).test(MinuteOf(week_s));
}

std::optional<PartitionChange> NextChange(const PartitionConfig& partition, double week_s) {
  if (partition.windows.empty()) return std::nullopt;
  const WeekMask open = OpenMinutes(partition);
  const double now = Normalise(week_s);
  const unsigned minute = MinuteOf(now);
  const bool is_open = open.test(minute);
  for (unsigned step = 1; step <= kMinutesPerWeek; ++step) {
    const unsigned m = (minute + step) % kMinutesPerWeek;
    if (open.test(m) != is_open) {
      PartitionChange change;
      change.opens = !is_open;
      change.at_week_s = m * 60.0;
      change.in_s = (minute + step) * 60.0 - now;
      return change;
    }
  }
  return std::nullopt;
}

std::optional<PartitionStop> StopOf(const PartitionConfig& partition, double week_s) {
  if (partition.ends == PartitionEnds::kNone || !IsOpen(partition, week_s)) return std::nullopt;
  auto change = NextChange(partition, week_s);
  if (!change || change->opens) return std::nullopt;
  PartitionStop stop;
  stop.in_s = change->in_s;
  stop.requeue = partition.ends == PartitionEnds::kRequeue;
  stop.reason = StrCat("partition ", partition.name, " closed at ", ClockText(change->at_week_s), " (",
                       DayName(MinuteOf(change->at_week_s) / kMinutesPerDay), ") (ends = \"",
                       stop.requeue ? "requeue" : "stop", "\")");
  return stop;
}

std::string WeekTimeText(double week_s) { return StrCat(DayName(MinuteOf(week_s) / kMinutesPerDay), " ", ClockText(week_s)); }

std::string OpensText(const PartitionConfig& partition, double week_s) {
  auto change = NextChange(partition, week_s);
  if (!change) return "never";
  return StrCat(ClockText(change->at_week_s), " (", DayName(MinuteOf(change->at_week_s) / kMinutesPerDay), ")");
}

std::string ClosedText(const PartitionConfig& partition, double week_s) {
  return StrCat("partition ", partition.name, " is closed until ", OpensText(partition, week_s));
}

std::string StatusLine(const PartitionConfig& partition, double week_s) {
  const std::string head = StrCat("partition ", partition.name, " (GPUs ", GpusText(partition), "): ");
  auto change = NextChange(partition, week_s);
  if (!change) return head + (partition.windows.empty() ? "open, no time windows" : "open, its windows cover the whole week");
  if (change->opens) return head + "closed, opens " + WeekTimeText(change->at_week_s);
  const std::string when = change->in_s <= 86400 ? ClockText(change->at_week_s) : WeekTimeText(change->at_week_s);
  return head + "open until " + when;
}

Result<const PartitionConfig*> SelectPartition(const Config& config, const std::string& requested) {
  const std::string& name = requested.empty() ? config.default_partition : requested;
  if (name.empty()) return static_cast<const PartitionConfig*>(nullptr);
  for (const auto& p : config.partitions)
    if (p.name == name) return &p;
  std::string known;
  for (const auto& p : config.partitions) known += (known.empty() ? "" : ", ") + p.name;
  return MakeError(ErrorKind::kInvalidArgument,
                   StrCat("--partition ", name, ": no such partition (",
                          known.empty() ? "this machine's config defines none" : "known: " + known, ")"));
}

Result<std::vector<std::string>> PartitionUuids(const PartitionConfig& partition, const std::vector<std::string>& uuids_by_index) {
  std::vector<std::string> out;
  for (const std::string& gpu : partition.gpus) {
    std::string uuid;
    if (!gpu.empty() && std::all_of(gpu.begin(), gpu.end(), ::isdigit)) {
      const unsigned long index = gpu.size() > 5 ? uuids_by_index.size() : std::stoul(gpu);
      if (index >= uuids_by_index.size())
        return MakeError(ErrorKind::kInvalidArgument,
                         StrCat("partition ", partition.name, ": GPU ", gpu, " is not on this machine (", uuids_by_index.size(),
                                " GPUs): mend partitions.", partition.name, ".gpus"));
      uuid = uuids_by_index[index];
    } else if (std::find(uuids_by_index.begin(), uuids_by_index.end(), gpu) != uuids_by_index.end()) {
      uuid = gpu;
    } else {
      return MakeError(ErrorKind::kInvalidArgument, StrCat("partition ", partition.name, ": GPU ", gpu,
                                                           " is not on this machine: mend partitions.", partition.name, ".gpus"));
    }
    if (std::find(out.begin(), out.end(), uuid) == out.end()) out.push_back(uuid);
  }
  return out;
}

Status ApplyPartition(const PartitionConfig& partition, Request& request,
                      const std::optional<std::vector<std::string>>& partition_uuids) {
  auto bad = [](std::string m) { return MakeError(ErrorKind::kInvalidArgument, std::move(m)); };
  if (partition.max_gpus_per_user && request.count > *partition.max_gpus_per_user)
    return bad(StrCat("-g ", request.count, ": partition ", partition.name, " allows at most ", *partition.max_gpus_per_user,
                      " GPUs per user: ask for fewer"));
  if (partition.max_time_limit_s) {
    if (!request.time_limit_s) {
      request.time_limit_s = *partition.max_time_limit_s;
    } else if (*request.time_limit_s > *partition.max_time_limit_s) {
      return bad(StrCat("--time-limit ", FormatSeconds(*request.time_limit_s), ": partition ", partition.name, " allows at most ",
                        FormatSeconds(*partition.max_time_limit_s), ": ask for less"));
    }
  }
  if (partition_uuids) {
    std::vector<std::string> within;
    for (const std::string& uuid : *partition_uuids)
      if (Allows(request, uuid)) within.push_back(uuid);
    request.allowed_uuids = std::move(within);
  }
  return Status::Ok();
}

Status RestrictToPartition(const PartitionConfig& partition, Request& request, const std::vector<std::string>& uuids_by_index) {
  auto uuids = PartitionUuids(partition, uuids_by_index);
  if (!uuids) return uuids.error();
  return ApplyPartition(partition, request, *uuids);
}

Status RequireOpen(const PartitionConfig& partition, double week_s) {
  if (IsOpen(partition, week_s)) return Status::Ok();
  return MakeError(ErrorKind::kNotEnoughGpus, ClosedText(partition, week_s));
}

}  // namespace gpulane::sched
