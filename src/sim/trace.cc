#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sim {
namespace {

Error Bad(const std::string& where, const std::string& what) {
  return MakeError(ErrorKind::kInvalidArgument, StrCat(where, ": ", what));
}

Result<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorKind::kIo, StrCat("cannot read trace ", path));
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

// Splits `line` at commas into `out` (views into line).
void Fields(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = line.find(',', from);
    out.push_back(line.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
}

std::optional<double> Number(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// Calls `row(fields, where)` for each data line of `text` after its header, which must name
// `wanted` columns; `index` gets each wanted column's position.
template <typename Row>
Status ForEachRow(const std::string& path, const std::string& text, const std::vector<std::string>& wanted,
                  std::vector<std::size_t>& index, Row&& row) {
  std::vector<std::string_view> fields;
  std::size_t from = 0, number = 0;
  bool header = true;
  while (from < text.size()) {
    std::size_t eol = text.find('\n', from);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + from, eol - from);
    from = eol + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty() || line.front() == '#') continue;
    Fields(line, fields);
    if (header) {
      header = false;
      index.clear();
      for (const std::string& name : wanted) {
        auto it = std::find_if(fields.begin(), fields.end(), [&](std::string_view f) { return Trim(f) == name; });
        if (it == fields.end())
          return Bad(StrCat(path, ":", number), StrCat("no column '", name, "' in the header (wanted: ", Join(wanted, ","), ")"));
        index.push_back(static_cast<std::size_t>(it - fields.begin()));
      }
      continue;
    }
    const std::string where = StrCat(path, ":", number);
    for (std::size_t i : index)
      if (i >= fields.size()) return Bad(where, StrCat("expected at least ", i + 1, " fields, found ", fields.size()));
    if (Status s = row(fields, where); !s.ok()) return s;
  }
  if (header) return Bad(path, "empty trace (no header)");
  return Status::Ok();
}

std::string Count(std::size_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

unsigned UserIndex(Trace& trace, std::unordered_map<std::string, unsigned>& seen, std::string_view name) {
  auto [it, fresh] = seen.try_emplace(std::string(name), static_cast<unsigned>(trace.users.size()));
  if (fresh) trace.users.emplace_back(name);
  return it->second;
}

Status ReadCsv(const std::string& path, const std::string& text, Trace& trace) {
  std::vector<std::size_t> col;
  std::unordered_map<std::string, unsigned> users;
  return ForEachRow(path, text, {"submit_s", "duration_s", "gpus", "mem_bytes", "user", "time_limit_s"}, col,
                    [&](const std::vector<std::string_view>& f, const std::string& where) -> Status {
    Job j;
    auto submit = Number(f[col[0]]), duration = Number(f[col[1]]), gpus = Number(f[col[2]]);
    if (!submit || *submit < 0) return Bad(where, "submit_s: give seconds >= 0");
    if (!duration || *duration < 0) return Bad(where, "duration_s: give seconds >= 0");
    if (!gpus || *gpus < 1 || *gpus != std::floor(*gpus) || *gpus > 1024) return Bad(where, "gpus: give a whole number 1..1024");
    j.submit_s = *submit;
    j.duration_s = *duration;
    j.gpus = static_cast<unsigned>(*gpus);
    const std::string_view mem = Trim(f[col[3]]);
    if (!mem.empty() && mem != "0") {
      if (std::all_of(mem.begin(), mem.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        unsigned long long bytes = 0;
        if (!ParseUint(mem, &bytes)) return Bad(where, "mem_bytes: too large");
        j.mem_bytes = bytes;
      } else {
        auto bytes = ParseSizeBytes(mem);
        if (!bytes) return Bad(where, StrCat("mem_bytes: ", bytes.error().message));
        j.mem_bytes = *bytes;
      }
      if (j.gpus != 1) return Bad(where, "mem_bytes: a job declaring memory shares one GPU (gpus 1)");
    }
    const std::string_view user = Trim(f[col[4]]);
    j.user = UserIndex(trace, users, user.empty() ? std::string_view("-") : user);
    if (!Trim(f[col[5]]).empty()) {
      auto limit = Number(f[col[5]]);
      if (!limit || *limit <= 0) return Bad(where, "time_limit_s: give seconds > 0, or leave it empty for none");
      j.time_limit_s = *limit;
    }
    trace.jobs.push_back(j);
    return Status::Ok();
  });
}

Status ReadMsrItp(const std::string& path, const std::string& text, Trace& trace) {
  std::vector<std::size_t> col;
  return ForEachRow(path, text, {"submission_time", "duration", "num_gpu"}, col,
                    [&](const std::vector<std::string_view>& f, const std::string& where) -> Status {
    auto submit = Number(f[col[0]]), duration = Number(f[col[1]]), gpus = Number(f[col[2]]);
    if (!submit || !duration || !gpus || *gpus < 1) return Bad(where, "submission_time, duration, num_gpu: numbers expected");
    Job j;
    j.submit_s = *submit;
    j.duration_s = std::max(0.0, *duration);
    j.gpus = static_cast<unsigned>(std::min(*gpus, 1024.0));
    trace.jobs.push_back(j);
    return Status::Ok();
  });
}

Status ReadPhilly(const std::string& path, const std::string& text, Trace& trace) {
  std::vector<std::size_t> col;
  std::unordered_map<std::string, unsigned> users;
  double clock = 0;
  return ForEachRow(path, text, {"user", "gpu_num", "interval", "run_time"}, col,
                    [&](const std::vector<std::string_view>& f, const std::string& where) -> Status {
    auto gpus = Number(f[col[1]]), interval = Number(f[col[2]]), run = Number(f[col[3]]);
    if (!gpus || !interval || !run || *gpus < 1 || *interval < 0) return Bad(where, "gpu_num, interval, run_time: numbers expected");
    clock += *interval;
    Job j;
    j.submit_s = clock;
    j.duration_s = std::max(0.0, *run);
    j.gpus = static_cast<unsigned>(std::min(*gpus, 1024.0));
    j.user = UserIndex(trace, users, StrCat("u", Trim(f[col[0]])));
    trace.jobs.push_back(j);
    return Status::Ok();
  });
}

Status ReadAlibaba(const std::string& path, const std::string& text, Trace& trace, std::uint64_t gpu_mem_bytes) {
  std::vector<std::size_t> col;
  struct Pod { double created, deleted, scheduled; unsigned gpus; double milli; };
  std::vector<Pod> pods;
  std::size_t cpu_only = 0, never_scheduled = 0;
  Status s = ForEachRow(path, text, {"num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"}, col,
                        [&](const std::vector<std::string_view>& f, const std::string& where) -> Status {
    auto gpus = Number(f[col[0]]), milli = Number(f[col[1]]), created = Number(f[col[2]]);
    auto deleted = Number(f[col[3]]), scheduled = Number(f[col[4]]);
    if (!gpus || !created) return Bad(where, "num_gpu, creation_time: numbers expected");
    if (*gpus < 1) return ++cpu_only, Status::Ok();
    if (!scheduled || !deleted) return ++never_scheduled, Status::Ok();
    pods.push_back({*created, *deleted, *scheduled, static_cast<unsigned>(std::min(*gpus, 1024.0)), milli.value_or(1000)});
    return Status::Ok();
  });
  if (!s.ok()) return s;
  double first_deletion = std::numeric_limits<double>::infinity(), last_deletion = 0;
  for (const Pod& p : pods) {
    first_deletion = std::min(first_deletion, p.deleted);
    last_deletion = std::max(last_deletion, p.deleted);
  }
  std::size_t before = 0, censored = 0, fractional = 0;
  for (const Pod& p : pods) {
    if (p.created < first_deletion) { ++before; continue; }
    if (p.deleted >= last_deletion) ++censored;
    Job j;
    j.submit_s = p.created;
    j.duration_s = std::max(0.0, p.deleted - p.scheduled);
    j.gpus = p.gpus;
    if (p.gpus == 1 && p.milli > 0 && p.milli < 1000) {
      j.mem_bytes = static_cast<std::uint64_t>(static_cast<double>(gpu_mem_bytes) * p.milli / 1000.0);
      ++fractional;
    }
    trace.jobs.push_back(j);
  }
  if (cpu_only) trace.notes.push_back(StrCat("alibaba: dropped ", Count(cpu_only), " CPU-only pods (num_gpu 0)"));
  if (never_scheduled) trace.notes.push_back(StrCat("alibaba: dropped ", Count(never_scheduled), " pods never scheduled (no scheduled_time)"));
  if (before)
    trace.notes.push_back(StrCat("alibaba: dropped ", Count(before), " pods created before observation began (before the first deletion_time, ",
                                 FormatSeconds(first_deletion), ")"));
  if (censored) trace.notes.push_back(StrCat("alibaba: ", Count(censored), " pods alive at the trace's end keep their censored runtime"));
  if (fractional)
    trace.notes.push_back(StrCat("alibaba: ", Count(fractional), " pods ask for a fraction of a GPU (gpu_milli < 1000): declared memory = gpu_milli/1000 x ",
                                 FormatBytes(gpu_mem_bytes)));
  return Status::Ok();
}

std::uint64_t Mix(std::uint64_t x) {  // splitmix64's finaliser: a fixed, well-spread hash
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

const char* FormatName(Format format) {
  switch (format) {
    case Format::kCsv: return "csv";
    case Format::kMsrItp: return "msr-itp";
    case Format::kPhilly: return "philly";
    case Format::kAlibaba: return "alibaba";
  }
  return "csv";
}

std::optional<Format> ParseFormat(const std::string& name) {
  for (Format f : {Format::kCsv, Format::kMsrItp, Format::kPhilly, Format::kAlibaba})
    if (name == FormatName(f)) return f;
  return std::nullopt;
}

Result<Trace> ReadTrace(const std::string& path, Format format, std::uint64_t gpu_mem_bytes) {
  Trace trace;
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (format != Format::kMsrItp)
      return MakeError(ErrorKind::kInvalidArgument, StrCat(path, " is a folder: give the trace file (a folder only for msr-itp)"));
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("cluster", 0) == 0 && entry.path().extension() == ".csv") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) return MakeError(ErrorKind::kInvalidArgument, StrCat(path, ": no cluster*.csv in it"));
  } else {
    files.push_back(path);
  }
  for (const std::string& file : files) {
    auto text = Slurp(file);
    if (!text) return text.error();
    Status s;
    switch (format) {
      case Format::kCsv: s = ReadCsv(file, *text, trace); break;
      case Format::kMsrItp: s = ReadMsrItp(file, *text, trace); break;
      case Format::kPhilly: s = ReadPhilly(file, *text, trace); break;
      case Format::kAlibaba: s = ReadAlibaba(file, *text, trace, gpu_mem_bytes); break;
    }
    if (!s.ok()) return s.error();
  }
  if (files.size() > 1) trace.notes.push_back(StrCat("msr-itp: merged ", files.size(), " clusters' files by submission time"));
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(), [](const Job& a, const Job& b) { return a.submit_s < b.submit_s; });
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) trace.jobs[i].id = i;
  return trace;
}

Result<TimeLimitFrom> ParseTimeLimitFrom(const std::string& text) {
  TimeLimitFrom t;
  if (text == "input") t.kind = TimeLimitFrom::kInput;
  else if (text == "duration") t.kind = TimeLimitFrom::kDuration;
  else if (text == "none") t.kind = TimeLimitFrom::kNone;
  else if (text.rfind("factor:", 0) == 0) {
    auto k = Number(std::string_view(text).substr(7));
    if (!k || *k <= 0) return MakeError(ErrorKind::kInvalidArgument, StrCat("--time-limit-from ", text, ": K must be a number > 0, e.g. factor:2"));
    t.kind = TimeLimitFrom::kFactor;
    t.factor = *k;
  } else {
    return MakeError(ErrorKind::kInvalidArgument,
                     StrCat("--time-limit-from ", text, ": give input, duration, factor:K or none"));
  }
  return t;
}

double GpuShare(const Job& job, std::uint64_t gpu_mem_bytes) {
  if (job.mem_bytes == 0) return job.gpus;
  return std::min(1.0, static_cast<double>(job.mem_bytes) / static_cast<double>(gpu_mem_bytes));
}

Status Transform(Trace& trace, const TransformOptions& o) {
  const unsigned cap = o.max_gpus_per_job.value_or(o.machine_gpus);
  std::vector<Job> kept;
  kept.reserve(trace.jobs.size());
  std::size_t clipped = 0, dropped = 0, too_big = 0, too_much_memory = 0;
  for (Job j : trace.jobs) {
    if (j.gpus > cap) {
      if (o.drop_oversize) { ++dropped; continue; }
      j.gpus = cap;
      ++clipped;
    }
    if (j.gpus > o.machine_gpus) { ++too_big; continue; }
    if (j.mem_bytes > o.gpu_mem_bytes) { ++too_much_memory; continue; }
    kept.push_back(j);
  }
  if (clipped) trace.notes.push_back(StrCat("clipped ", Count(clipped), " jobs asking for more than ", cap, " GPUs to ", cap));
  if (dropped) trace.notes.push_back(StrCat("dropped ", Count(dropped), " jobs asking for more than ", cap, " GPUs"));
  if (too_big) trace.notes.push_back(StrCat("dropped ", Count(too_big), " jobs asking for more than the machine's ", o.machine_gpus, " GPUs"));
  if (too_much_memory)
    trace.notes.push_back(StrCat("dropped ", Count(too_much_memory), " jobs declaring more than a GPU's ", FormatBytes(o.gpu_mem_bytes)));
  if (o.limit_jobs && kept.size() > *o.limit_jobs) {
    trace.notes.push_back(StrCat("kept the first ", Count(*o.limit_jobs), " of ", Count(kept.size()), " jobs"));
    kept.resize(*o.limit_jobs);
  }
  trace.jobs = std::move(kept);
  if (trace.jobs.empty()) return MakeError(ErrorKind::kInvalidArgument, "no jobs left to simulate");

  // Users.
  const bool has_users = trace.users.size() > 1 || (trace.users.size() == 1 && trace.users[0] != "-");
  if (!has_users || o.users) {
    const unsigned k = o.users.value_or(8);
    if (!has_users) {
      for (Job& j : trace.jobs) j.user = static_cast<unsigned>(Mix(j.id) % k);
      trace.notes.push_back(StrCat("no users in the trace: jobs assigned to ", k, " users by a hash of their number"));
    } else {
      for (Job& j : trace.jobs) j.user %= k;  // users in order of first appearance, round robin
      trace.notes.push_back(StrCat("mapped ", trace.users.size(), " users onto ", k, " (in order of first appearance, round robin)"));
    }
    trace.users.clear();
    for (unsigned u = 0; u < k; ++u) trace.users.push_back(StrCat("user", u));
  }

  // Time limits.
  std::size_t shorter = 0;
  for (Job& j : trace.jobs) {
    switch (o.time_limit.kind) {
      case TimeLimitFrom::kInput: break;
      case TimeLimitFrom::kDuration: j.time_limit_s = std::max(1.0, j.duration_s); break;
      case TimeLimitFrom::kFactor: j.time_limit_s = std::max(1.0, j.duration_s * o.time_limit.factor); break;
      case TimeLimitFrom::kNone: j.time_limit_s.reset(); break;
    }
    if (j.time_limit_s && *j.time_limit_s < j.duration_s) ++shorter;
  }
  if (shorter) trace.notes.push_back(StrCat(Count(shorter), " jobs have a time limit shorter than their duration: they are stopped at it"));

  // Load.
  auto offered = [&] {
    double work = 0;
    for (const Job& j : trace.jobs) work += GpuShare(j, o.gpu_mem_bytes) * j.duration_s;
    const double span = trace.jobs.back().submit_s - trace.jobs.front().submit_s;
    return span > 0 ? work / (o.machine_gpus * span) : std::numeric_limits<double>::infinity();
  };
  const double first = trace.jobs.front().submit_s;
  for (Job& j : trace.jobs) j.submit_s -= first;
  trace.offered_load = offered();
  if (o.load) {
    if (!std::isfinite(trace.offered_load))
      return MakeError(ErrorKind::kInvalidArgument, "--load: every job arrives at once, so there are no gaps to scale");
    const double scale = trace.offered_load / *o.load;
    for (Job& j : trace.jobs) j.submit_s *= scale;
    trace.notes.push_back(StrCat("offered load ", fmt::format("{:.3f}", trace.offered_load), " scaled to ",
                                 fmt::format("{:.3f}", *o.load), " (inter-arrival times x ", fmt::format("{:.4g}", scale), ")"));
    trace.offered_load = offered();
  }
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) trace.jobs[i].id = i;
  return Status::Ok();
}

}  // namespace gpulane::sim
