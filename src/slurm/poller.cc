#include "slurm/poller.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace gpulane::slurm {
namespace {

using nlohmann::json;

// The registered id a row belongs to: "1234" for "1234", "1234_5" and "1234_[6-9]".
std::string ParentOf(const std::string& id) { return id.substr(0, id.find('_')); }

json ToJson(const PolledJob& p) {
  json j = {{"id", p.id}, {"parent", p.parent}, {"job_id", p.job_id}, {"slurm_state", p.slurm_state}, {"partition", p.partition},
            {"nodes", p.nodes}, {"state", p.view.state}, {"reason", p.view.reason}, {"finished", p.view.finished},
            {"ran", p.view.ran}, {"confirmed", p.confirmed}};
  if (p.view.exit_code) j["exit_code"] = *p.view.exit_code;
  return j;
}

PolledJob FromJson(const json& j) {
  PolledJob p;
  p.id = j.value("id", "");
  p.parent = j.value("parent", "");
  p.job_id = j.value("job_id", "");
  p.slurm_state = j.value("slurm_state", "");
  p.partition = j.value("partition", "");
  p.nodes = j.value("nodes", "");
  p.view.state = j.value("state", "");
  p.view.reason = j.value("reason", "");
  p.view.finished = j.value("finished", false);
  p.view.ran = j.value("ran", false);
  p.confirmed = j.value("confirmed", false);
  if (j.contains("exit_code") && j["exit_code"].is_number_integer()) p.view.exit_code = j["exit_code"].get<int>();
  return p;
}

// The shared poll: when it was made and every row it knows, by row id.
struct Cache {
  double time_s = 0;
  std::map<std::string, PolledJob> rows;
};

Cache ReadCache(const std::string& path) {
  Cache cache;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return cache;
  cache.time_s = j.value("time_s", 0.0);
  for (const auto& row : j.value("rows", json::array())) {
    PolledJob p = FromJson(row);
    if (!p.id.empty()) cache.rows[p.id] = p;
  }
  return cache;
}

Status WriteCache(const std::string& path, const Cache& cache) {
  json rows = json::array();
  for (const auto& entry : cache.rows) rows.push_back(ToJson(entry.second));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"time_s", cache.time_s}, {"rows", rows}}.dump() << "\n";
    if (!out) return MakeError(ErrorKind::kIo, fmt::format("cannot write {}", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot rename {}: {}", tmp, std::strerror(errno)));
  return Status::Ok();
}

// Holds an exclusive flock on a file for its lifetime.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0)
      while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~FileLock() {
    if (fd_ >= 0) close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

std::optional<int> ReadExitFile(const std::string& path) {
  std::ifstream in(path);
  int code = -1;
  if (!(in >> code) || code < 0 || code > 255) return std::nullopt;
  return code;
}

// The keys of a submission's rows: "12" itself and "12_..." (never "120").
std::vector<std::string> KeysOf(const std::map<std::string, PolledJob>& rows, const std::string& parent) {
  std::vector<std::string> keys;
  if (rows.count(parent)) keys.push_back(parent);
  const std::string prefix = parent + "_";
  for (auto it = rows.lower_bound(prefix); it != rows.end() && it->first.rfind(prefix, 0) == 0; ++it)
    keys.push_back(it->first);
  return keys;
}

bool Done(const std::map<std::string, PolledJob>& rows, const std::string& parent) {
  const auto keys = KeysOf(rows, parent);
  for (const auto& key : keys)
    if (!rows.at(key).view.finished || !rows.at(key).confirmed) return false;
  return !keys.empty();
}

// Slurm's answer for the jobs `need` merged into `rows`: its rows replace what was known of a job it
// answered for, except finished rows it no longer lists (purged tasks), and an exit code from the
// script stays when Slurm has not caught up (still COMPLETING). Returns the jobs it answered for.
std::set<std::string> MergeSlurmRows(const std::vector<std::string>& need, const std::vector<PolledJob>& answer,
                                     std::map<std::string, PolledJob>& rows) {
  std::set<std::string> answered;
  for (const auto& p : answer) answered.insert(p.parent);
  for (const auto& id : need) {
    if (!answered.count(id)) continue;
    for (const auto& key : KeysOf(rows, id))
      if (!rows.at(key).view.finished) rows.erase(key);
  }
  for (const auto& p : answer) {
    auto it = rows.find(p.id);
    if (it != rows.end() && it->second.view.finished && !p.view.finished) continue;
    rows[p.id] = p;
  }
  return answered;
}

// Gone from squeue, no accounting, no exit code: ended without its script finishing (cancelled,
// timed out or its node failed before Slurm could tell us which).
PolledJob GoneWithoutExitCode(const std::string& slurm_id) {
  PolledJob p;
  p.id = slurm_id;
  p.parent = slurm_id;
  p.view.state = "cancelled";
  p.view.finished = true;
  p.view.reason = "Slurm no longer lists it and it wrote no exit code (cancelled, timed out or its node failed)";
  p.confirmed = true;
  return p;
}

}  // namespace

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

Poller::Poller(CommandRunner& runner, const Clock& clock, JobRegistry registry, PollSettings settings)
    : runner_(runner), clock_(clock), registry_(std::move(registry)), settings_(settings) {}

std::vector<PolledJob> Poller::FromExitFiles(const std::string& id, bool array, bool slurm_gone) const {
  std::vector<PolledJob> rows;
  const std::string dir = registry_.ExitCodeDir();
  auto add = [&](const std::string& row_id) {
    if (auto code = ReadExitFile(dir + "/" + row_id)) {
      PolledJob p;
      p.id = row_id;
      p.parent = id;
      p.view = ViewFromExitFile(*code, slurm_gone);
      p.confirmed = slurm_gone;
      rows.push_back(std::move(p));
    }
  };
  if (!array) {
    add(id);
    return rows;
  }
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind(id + "_", 0) == 0 && name.find(".tmp") == std::string::npos) add(name);
    }
    closedir(d);
  }
  return rows;
}

Result<std::vector<PolledJob>> Poller::AskSlurm(const std::vector<std::string>& ids) {
  std::vector<PolledJob> out;
  const std::vector<std::string> squeue = {"squeue", "-a", "-h", "--states=all", "-j", JoinIds(ids), "-O", kSqueueFormat};
  ++calls_;
  auto ran = runner_.Run(squeue);
  if (!ran) return ran.error();
  std::set<std::string> seen;
  if (ran->exit_code == 0) {
    auto rows = ParseSqueue(ran->stdout_text);
    if (!rows) return rows.error();
    for (const auto& row : *rows) {
      PolledJob p{row.id, ParentOf(row.id), row.job_id, row.state, row.partition, row.nodes, MapSlurmState(row)};
      p.confirmed = p.view.finished;
      seen.insert(p.parent);
      out.push_back(std::move(p));
    }
  } else if (ran->stderr_text.find("Invalid job id") == std::string::npos) {
    return MakeError(ErrorKind::kUnavailable, DescribeFailure(squeue, *ran) + "; is Slurm reachable (scontrol ping)?");
  }
  std::vector<std::string> missing;
  for (const auto& id : ids)
    if (!seen.count(id)) missing.push_back(id);
  if (missing.empty()) return out;
  const std::vector<std::string> sacct = {"sacct", "-X", "-n", "-P", "-j", JoinIds(missing), "-o", kSacctFormat};
  ++calls_;
  auto accounted = runner_.Run(sacct);
  if (accounted && accounted->exit_code == 0) {
    auto rows = ParseSacct(accounted->stdout_text);
    if (rows)
      for (const auto& row : *rows) {
        PolledJob p{row.id, ParentOf(row.id), row.job_id, row.state, row.partition, row.nodes, MapSlurmState(row)};
        p.confirmed = p.view.finished;
        seen.insert(p.parent);
        out.push_back(std::move(p));
      }
  }
  return out;
}

Status Poller::Invalidate() {
  if (Status made = MakeDirs(registry_.Dir()); !made.ok()) return made;
  FileLock lock(registry_.Dir() + "/poll.lock");
  if (!lock.ok()) return MakeError(ErrorKind::kIo, fmt::format("cannot lock {}/poll.lock", registry_.Dir()));
  const std::string path = registry_.Dir() + "/poll.json";
  Cache cache = ReadCache(path);
  if (cache.time_s == 0) return Status::Ok();
  cache.time_s = 0;
  return WriteCache(path, cache);
}

Result<std::vector<PolledJob>> Poller::Poll(const std::vector<RegisteredJob>& jobs) {
  if (Status made = MakeDirs(registry_.Dir()); !made.ok()) return made.error();
  FileLock lock(registry_.Dir() + "/poll.lock");
  if (!lock.ok()) return MakeError(ErrorKind::kIo, fmt::format("cannot lock {}/poll.lock", registry_.Dir()));
  const std::string path = registry_.Dir() + "/poll.json";
  Cache cache = ReadCache(path);
  const double now_s = clock_.WallS(), age_s = now_s - cache.time_s;
  bool changed = false;
  std::vector<std::string> need;
  bool uncovered = false;
  for (const auto& job : jobs) {
    if (Done(cache.rows, job.slurm_id)) continue;
    // The batch script's exit code: the command ended; no need to ask Slurm.
    for (PolledJob& p : FromExitFiles(job.slurm_id, job.array, /*slurm_gone=*/false)) {
      auto it = cache.rows.find(p.id);
      if (job.array && it == cache.rows.end()) continue;  // an array's tasks are known from Slurm first
      if (it == cache.rows.end() || !it->second.view.finished) {
        if (it != cache.rows.end()) {
          p.job_id = it->second.job_id;
          p.slurm_state = it->second.slurm_state;
          p.partition = it->second.partition;
          p.nodes = it->second.nodes;
        }
        cache.rows[p.id] = p;
        changed = true;
      }
    }
    {  // not Done: unfinished, or finished by its exit-code file and not yet confirmed by Slurm
      need.push_back(job.slurm_id);
      if (KeysOf(cache.rows, job.slurm_id).empty()) uncovered = true;
    }
  }
  if (!need.empty() && (age_s >= settings_.interval_s || (uncovered && age_s >= settings_.new_job_interval_s) || age_s < 0)) {
    // One call for every unfinished job of the user, not only the caller's: the next command
    // (`show` of another job, `cancel` of two) then finds its jobs in the shared poll.
    std::vector<RegisteredJob> polled = jobs;
    auto registered = registry_.All();
    if (!registered) return registered.error();
    for (const auto& job : *registered)
      if (!Done(cache.rows, job.slurm_id) && std::find(need.begin(), need.end(), job.slurm_id) == need.end()) {
        need.push_back(job.slurm_id);
        polled.push_back(job);
      }
    auto rows = AskSlurm(need);
    if (!rows) return rows.error();
    const std::set<std::string> answered = MergeSlurmRows(need, *rows, cache.rows);
    for (const auto& job : polled) {
      if (answered.count(job.slurm_id) || Done(cache.rows, job.slurm_id)) continue;
      if (std::find(need.begin(), need.end(), job.slurm_id) == need.end()) continue;
      for (const auto& key : KeysOf(cache.rows, job.slurm_id))
        if (!cache.rows.at(key).view.finished || !cache.rows.at(key).confirmed) cache.rows.erase(key);
      std::vector<PolledJob> written = FromExitFiles(job.slurm_id, job.array, /*slurm_gone=*/true);
      for (const auto& p : written) cache.rows[p.id] = p;
      if (!written.empty()) continue;
      for (const auto& key : KeysOf(cache.rows, job.slurm_id)) cache.rows.erase(key);
      cache.rows[job.slurm_id] = GoneWithoutExitCode(job.slurm_id);
    }
    cache.time_s = now_s;
    changed = true;
  }
  if (changed)
    if (Status written = WriteCache(path, cache); !written.ok()) return written.error();
  std::vector<PolledJob> out;
  for (const auto& job : jobs)
    for (const auto& key : KeysOf(cache.rows, job.slurm_id)) out.push_back(cache.rows.at(key));
  return out;
}

}  // namespace gpulane::slurm
