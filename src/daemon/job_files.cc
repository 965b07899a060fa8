#include "daemon/job_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace gpulane::daemon {
namespace {

using nlohmann::json;

// Flushes a folder's entries (a rename in it) to disk.
void SyncDir(const std::string& dir) {
  if (int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

std::string StatusText(const SupervisorStatus& s) {
  json j = {{"phase", s.phase}, {"pid", s.pid}, {"reason", s.reason}, {"gpu_uuids", s.gpu_uuids},
            {"timed_out", s.timed_out}, {"interrupted", s.interrupted}, {"start_failed", s.start_failed},
            {"held", s.held}, {"marks_exec", s.marks_exec}, {"partition_stopped", s.partition_stopped},
            {"preempted", s.preempted}, {"requeue", s.requeue}};
  if (s.start_time) j["start_time"] = *s.start_time;
  if (s.end_time) j["end_time"] = *s.end_time;
  if (s.exit_code) j["exit_code"] = *s.exit_code;
  if (!s.logs.stdout_path.empty() || !s.logs.stderr_path.empty()) j["logs"] = store::LogsToJson(s.logs);
  if (!s.isolation.empty()) j["isolation"] = s.isolation;
  // The reason is text for people; one that quotes bytes that are not UTF-8 must still make a status
  // file (a strict dump would throw), so such bytes become U+FFFD here.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string JobFiles::spec_path() const { return fmt::format("{}/{}.spec.json", dir_, id_); }
std::string JobFiles::status_path() const { return fmt::format("{}/{}.status.json", dir_, id_); }
std::string JobFiles::lock_path() const { return fmt::format("{}/{}.lock", dir_, id_); }
std::string JobFiles::exec_path() const { return fmt::format("{}/{}.exec", dir_, id_); }
std::string JobFiles::reserve_path() const { return fmt::format("{}/{}.reserve", dir_, id_); }

// On POSIX, not os::FileSystem: the point is the file's disk blocks, held until it goes.
Status JobFiles::Reserve(std::uint64_t bytes) const {
  const std::string path = reserve_path();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  // Written, not only fallocated: tmpfs and ext4 alike then hold the blocks until the file goes.
  std::string zeros(static_cast<std::size_t>(bytes), '\0');
  const bool ok = write(fd, zeros.data(), zeros.size()) == static_cast<ssize_t>(zeros.size());
  const int err = errno;
  close(fd);
  if (ok) return Status::Ok();
  unlink(path.c_str());
  return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

Status JobFiles::WriteStatusReserved(const SupervisorStatus& status) const {
  Status written = WriteStatus(status);
  if (written.ok()) {
    (void)files_.RemoveFile(reserve_path());  // best effort: Remove() takes one left behind
    return written;
  }
  // The folder is full. The status is written into the reserve's own blocks, which it keeps, and
  // the reserve is renamed over the status file: freeing the reserve first would let another
  // writer on the full folder (the daemon retrying its store) take the room between the two steps.
  // On POSIX, not os::FileSystem: written into the reserve's own blocks, through its descriptor.
  const std::string text = StatusText(status), reserve = reserve_path();
  int fd = open(reserve.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return written;  // no reserve: the caller tries again
  struct stat st {};
  const bool fits = fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) >= text.size();
  const bool ok = fits && pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
                  ftruncate(fd, static_cast<off_t>(text.size())) == 0 && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok || rename(reserve.c_str(), status_path().c_str()) != 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {} into its reserve {}: {}", status_path(), reserve,
                                                 fits ? std::strerror(ok ? errno : err) : "the status is larger"));
  SyncDir(dir_);
  return Status::Ok();
}

LostSupervisorAction DecideLostSupervisor(const std::optional<SupervisorStatus>& status, bool exec_marked,
                                          bool stored_running) {
  if (status && status->phase == "done") return LostSupervisorAction::kCollect;
  // The child flushed its mark to disk just before its execve: the command may have run, even if
  // the "running" that came before it was lost (a power loss: status writes are not flushed).
  if (exec_marked) return LostSupervisorAction::kFail;
  if (status && status->phase == "running")
    return status->marks_exec ? LostSupervisorAction::kRequeue : LostSupervisorAction::kFail;
  // Stored as running, with neither a status nor a supervisor: it ran (its record is gone).
  if (!status && stored_running) return LostSupervisorAction::kFail;
  return LostSupervisorAction::kGrace;
}

// On POSIX, not os::FileSystem: the descriptor crosses the job child's fork, which writes through it.
Result<int> JobFiles::OpenExecMark() const {
  const std::string path = exec_path();
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  if (pwrite(fd, "0", 1, 0) != 1) {
    const int err = errno;
    close(fd);
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  return fd;
}

bool JobFiles::ExecMarked() const {
  auto text = files_.ReadFile(exec_path());
  return text && !text->empty() && (*text)[0] == '1';
}

Status JobFiles::WriteSpec(const store::Job& job) const {
  // The reason is text for people; one quoting bytes that are not UTF-8 must still make a spec file
  // (a strict dump would throw), so such bytes become U+FFFD. The job's bytes (argv, env, paths)
  // are written as bytes (util/bytes_json.h).
  const json j = store::JobToStoredJson(job);
  return files_.WriteFileDurably(spec_path(), j.dump(-1, ' ', false, json::error_handler_t::replace), 0600);
}

Result<store::Job> JobFiles::ReadSpec() const {
  auto text = files_.ReadFile(spec_path());
  if (!text) return MakeError(ErrorKind::kNotFound, fmt::format("no spec for job {} in {}", id_, dir_));
  const json j = json::parse(*text, nullptr, false);
  auto damaged = [&](const std::string& why) {
    return MakeError(ErrorKind::kInternal, fmt::format("the spec of job {} is damaged: {}", id_, why));
  };
  if (j.is_discarded()) return damaged("not JSON");
  auto job = store::JobFromJson(j);
  if (!job) return damaged(job.error().message);
  if (job->id != id_) return damaged(fmt::format("it names job {}", job->id));
  return job;
}

Status JobFiles::WriteStatus(const SupervisorStatus& s) const {
  // "waiting" and "running" need only survive the daemon's crashes (the page cache does that) and
  // sit on the path from a GPU's release to the next job's start, where two disk flushes cost
  // 8-11 ms (bench/results/queue-*.md). The outcome ("done") is flushed to disk.
  const std::string text = StatusText(s);
  if (s.phase == "done") return files_.WriteFileDurably(status_path(), text, 0644);
  return files_.WriteFileAtomically(status_path(), text, 0644);
}

std::optional<SupervisorStatus> JobFiles::ReadStatus() const {
  auto text = files_.ReadFile(status_path());
  if (!text) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  SupervisorStatus s;
  s.phase = j.value("phase", "waiting");
  s.pid = j.value("pid", 0);
  s.reason = j.value("reason", "");
  s.gpu_uuids = j.value("gpu_uuids", std::vector<std::string>{});
  s.timed_out = j.value("timed_out", false);
  s.partition_stopped = j.value("partition_stopped", false);
  s.preempted = j.value("preempted", false);
  s.requeue = j.value("requeue", false);
  s.interrupted = j.value("interrupted", false);
  s.start_failed = j.value("start_failed", false);
  s.held = j.value("held", false);
  s.marks_exec = j.value("marks_exec", false);
  if (j.contains("start_time")) s.start_time = j["start_time"].get<double>();
  if (j.contains("end_time")) s.end_time = j["end_time"].get<double>();
  if (j.contains("exit_code")) s.exit_code = j["exit_code"].get<int>();
  if (j.contains("logs")) s.logs = store::LogsFromJson(j["logs"]);
  s.isolation = j.value("isolation", "");
  return s;
}

bool JobFiles::SupervisorAlive() const { return files_.LockedExclusively(lock_path()); }

// Best effort, as the unlink(2) calls were: a file that cannot be removed is left behind.
void JobFiles::Remove() const {
  for (const std::string& path : {spec_path(), status_path(), lock_path(), exec_path(), reserve_path()})
    (void)files_.RemoveFile(path);
}

void JobFiles::RemoveStatus() const { (void)files_.RemoveFile(status_path()); }

std::optional<std::int64_t> JobIdOfFile(const std::string& name) {
  std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string::npos) return std::nullopt;
  std::int64_t id = 0;
  for (std::size_t i = 0; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    id = id * 10 + (name[i] - '0');
  }
  return id;
}

std::optional<std::set<std::int64_t>> JobIdsWithFiles(os::FileSystem& files, const std::string& jobs_dir) {
  auto names = files.ListDir(jobs_dir);
  if (!names) return std::nullopt;
  std::set<std::int64_t> ids;
  for (const std::string& name : *names)
    if (auto id = JobIdOfFile(name)) ids.insert(*id);
  return ids;
}

}  // namespace gpulane::daemon
