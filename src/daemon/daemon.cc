// Daemon start-up and recovery.
#include "daemon/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fmt/format.h>

#include "daemon/store_marker.h"
#include "os/user_groups.h"
#include "sched/user_limits.h"
#include "util/exit_codes.h"
#include "util/say.h"
#include "lease/lease_dir.h"

namespace gpulane::daemon {
namespace {

Status MakeDirs(const std::string& path, mode_t mode) {
  std::string partial;
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      partial = path.substr(0, i);
      if (mkdir(partial.c_str(), i == path.size() ? mode : 0755) != 0 && errno != EEXIST)
        return MakeError(ErrorKind::kIo, fmt::format("cannot create {}: {}", partial, std::strerror(errno)));
    }
  }
  return Status::Ok();
}

// The names of the groups of the job's user, for "@group" shares: the user database's answer
// for the uid (os/user_groups.h), the same look-up [limits.groups.NAME] uses.
std::vector<std::string> GroupsOfUser(const std::string&, std::uint32_t uid, std::uint32_t) { return GroupNamesOf(uid); }

// The stop signals are blocked before any thread starts: the sampler's, and NVML's own, which
// libnvidia-ml starts in nvmlInit (the fake NVML starts none). A thread that had them unblocked
// would take SIGTERM and end the daemon on the spot (exit 143, measured on the H200 when they
// were blocked after NvmlBackend::Open), without its clean stop (the loop's signalfd,
// Daemon::WatchJobsDir). Returns them.
sigset_t BlockDaemonSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD, SIGHUP}) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int StoreBusyMs(const DaemonSettings& settings) { return static_cast<int>(settings.store_busy_timeout_s * 1000); }

// The gpulane binary this daemon runs (its supervisors and gpulane-web run it too).
Result<std::string> OwnBinaryPath() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return MakeError(ErrorKind::kIo, "cannot find the gpulane binary (/proc/self/exe)");
  return std::string(exe, static_cast<std::size_t>(n));
}

}  // namespace

Daemon::Daemon(DaemonPaths paths, Config config, DaemonSettings settings, DaemonParts parts)
    : paths_(std::move(paths)), config_(std::move(config)), settings_(settings), parts_(std::move(parts)),
      env_(*parts_.env), clock_(env_.clock) {
  jobs_dir_ = paths_.state_dir + "/jobs";
}

Daemon::~Daemon() {
  for (auto& [fd, c] : connections_) close(fd);
  for (int fd : {listen_fd_, signal_fd_, watch_fd_, lock_fd_, spare_fd_})
    if (fd >= 0) close(fd);
}

void Daemon::Log(const std::string& message) const {
  char when[32];
  const auto now = static_cast<std::time_t>(clock_.WallS());
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  Say("{} gpulane-daemon[{}]: {}\n", when, getpid(), message);  // never throws: its log may be on a full disk
}

Status Daemon::Setup() {
  const sigset_t stops = BlockDaemonSignals();
  FitConnectionsToFileLimit();
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (Status locked = LockStateDir(); !locked.ok()) return locked;
  if (Status opened = OpenStore(); !opened.ok()) return opened;
  auto snapshot = OpenGpus();
  if (!snapshot) return snapshot.error();
  if (config_.telemetry_enabled) StartSampler();
  OpenLeaseDirs();
  auto exe = OwnBinaryPath();
  if (!exe) return exe.error();
  launcher_ = parts_.make_launcher({*exe, jobs_dir_, paths_.state_dir + "/supervisor.log"});
  jobs_ = std::make_unique<JobTable>(*store_, jobs_dir_, clock_, env_.files, *launcher_, TableLimits(*snapshot), [this](const std::string& line) { Log(line); });
  jobs_->SetGroupsLookup(GroupsOfUser);
  if (Status watching = WatchJobsDir(stops); !watching.ok()) return watching;
  Recover();
  parse_worker_ = std::make_unique<ParseWorker>();
  Status listening = OpenSocket();
  launcher_->CloseInChild({lock_fd_, listen_fd_, spare_fd_});
  launcher_->ChildFileLimit(started_file_limit_);
  if (listening.ok()) {
    web_ = MakeWebChild(config_, paths_, *exe, {lock_fd_, listen_fd_, spare_fd_}, env_, [this](const std::string& line) { Log(line); });
    if (web_) web_->Start(clock_.MonotonicS());
  }
  return listening;
}

// Connections take descriptors: as many as the hard limit allows (the unit raises it with
// LimitNOFILE), and never more connections than fit under it with kFdMargin to spare.
void Daemon::FitConnectionsToFileLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  started_file_limit_ = static_cast<std::uint64_t>(files.rlim_cur);
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) getrlimit(RLIMIT_NOFILE, &files);
  }
  const std::size_t usable = files.rlim_cur > 2 * kFdMargin ? static_cast<std::size_t>(files.rlim_cur) - kFdMargin
                                                             : static_cast<std::size_t>(files.rlim_cur) / 2;
  if (settings_.max_connections > usable) {
    Log(fmt::format("at most {} connections (RLIMIT_NOFILE {} less {} for the daemon itself), not {}", usable,
                    static_cast<unsigned long long>(files.rlim_cur), kFdMargin, settings_.max_connections));
    settings_.max_connections = std::max<std::size_t>(usable, 1);
  }
}

Status Daemon::LockStateDir() {
  Status s = MakeDirs(paths_.state_dir, 0700);
  if (s.ok()) s = MakeDirs(jobs_dir_, 0700);
  if (!s.ok()) return s;
  // One daemon per state folder.
  lock_fd_ = open((paths_.state_dir + "/daemon.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0 || flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
    return MakeError(ErrorKind::kUnavailable,
                     fmt::format("another gpulane daemon already uses {}", paths_.state_dir));
  return Status::Ok();
}

Status Daemon::OpenStore() {
  // Never silently on an empty or older queue than the one this daemon last ran on (store_marker.h).
  const std::string db_path = paths_.state_dir + "/jobs.db";
  if (Status known = CheckStoreFileAgainstMarker(env_.files, db_path); !known.ok()) return known;
  auto store = parts_.open_store(db_path, StoreBusyMs(settings_));
  if (!store) return store.error();
  store_ = std::move(store).value();
  // Arrays a daemon was storing when it stopped or was killed: never acknowledged, so removed.
  auto dropped = store_->DropIncompleteArrays();
  if (!dropped) return dropped.error();
  if (*dropped)
    Log(fmt::format("removed {} array submission{} whose storing did not finish (never acknowledged to their client)",
                    *dropped, *dropped == 1 ? "" : "s"));
  auto max_id = store_->MaxId();
  if (!max_id) return max_id.error();
  if (Status same = CheckStoreIdsAgainstMarker(env_.files, db_path, *max_id); !same.ok()) return same;
  if (Status marked = WriteStoreMarker(env_.files, db_path, *max_id); !marked.ok()) return marked;
  marked_max_id_ = *max_id;
  return Status::Ok();
}

Result<GpuSnapshot> Daemon::OpenGpus() {
  auto backend = env_.gpus.Open();
  if (!backend) return backend.error();
  backend_ = std::move(backend).value();
  auto snapshot = backend_->Read();  // every field once: NVML's first-query costs are paid here, not by clients
  if (!snapshot) return snapshot.error();
  gpu_count_ = static_cast<unsigned>(snapshot->devices.size());
  for (const auto& d : snapshot->devices) gpu_index_[d.uuid] = d.pci_index;
  gpu_identity_ = *snapshot;
  return snapshot;
}

void Daemon::OpenLeaseDirs() {
  if (paths_.system) {
    if (auto opened = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config_.lease_dir), clock_))
      line_dir_ = std::make_unique<lease::LeaseDir>(std::move(opened).value());
    else
      Log(fmt::format("fair share: {}: `gpulane run` waits in submission order", opened.error().message));
  }
  // Every lease's time limit, also when its own side was killed (time_limit_watch.h).
  if (auto opened = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config_.lease_dir), clock_)) {
    limit_dir_ = std::make_unique<lease::LeaseDir>(std::move(opened).value());
    limit_watch_ = std::make_unique<TimeLimitWatch>(config_, env_.processes, [this](const std::string& line) { Log(line); });
  } else {
    Log(fmt::format("time limits: {}: leases whose own side ended are not stopped at their time limit", opened.error().message));
  }
}

JobTableLimits Daemon::TableLimits(const GpuSnapshot& snapshot) {
  const unsigned max_waiting = config_.max_waiting_supervisors ? config_.max_waiting_supervisors : sched::DefaultMaxWaiting(gpu_count_);
  const int busy_ms = StoreBusyMs(settings_);
  JobTableLimits limits{settings_.requeue_grace_s, max_waiting};
  limits.busy_timeout_ms = busy_ms;
  limits.retry_busy_timeout_ms = std::min(busy_ms, limits.retry_busy_timeout_ms);
  limits.retry_interval_s = settings_.tick_s;
  if (sched::AnyLimits(config_)) {
    limits.max_gpus_of = [this](std::uint32_t uid, const std::string& user) { return LimitsOfUid(uid, user).max_gpus; };
    // Only when some table sets it: the table then keeps the last 24 hours' usage records.
    bool gpu_hours = config_.limits.max_gpu_hours_per_day.has_value();
    for (const auto* tables : {&config_.user_limits, &config_.group_limits})
      for (const auto& [name, values] : *tables) gpu_hours = gpu_hours || values.max_gpu_hours_per_day;
    if (gpu_hours)
      limits.max_gpu_hours_of = [this](std::uint32_t uid, const std::string& user) {
        return LimitsOfUid(uid, user).max_gpu_hours_per_day;
      };
  }
  limits.line_now = [this] { return LineNow(); };
  limits.fair_share.half_life_s = config_.fair_share_half_life_s;
  limits.max_preemptions_per_minute = config_.max_preemptions_per_minute;
  limits.fair_share.weight_fair_share = config_.priority_weight_fair_share;
  limits.fair_share.weight_age = config_.priority_weight_age;
  limits.fair_share.max_age_s = config_.priority_max_age_s;
  limits.fair_share.shares = config_.shares;
  for (const auto& d : snapshot.devices)
    if (d.memory_total_bytes)
      limits.gpu_total_bytes = std::min(limits.gpu_total_bytes.value_or(*d.memory_total_bytes), *d.memory_total_bytes);
  return limits;
}

Status Daemon::WatchJobsDir(const sigset_t& stops) {
  signal(SIGPIPE, SIG_IGN);
  signal_fd_ = signalfd(-1, &stops, SFD_NONBLOCK | SFD_CLOEXEC);
  watch_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (watch_fd_ < 0 || inotify_add_watch(watch_fd_, jobs_dir_.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot watch {}: {}", jobs_dir_, std::strerror(errno)));
  return Status::Ok();
}

void Daemon::StartSampler() {
  auto backend = env_.gpus.Open();  // its own handle: the sampler's reads keep state (Xid events)
  if (!backend) {
    Log(fmt::format("telemetry is off: {}", backend.error().message));
    return;
  }
  auto history = parts_.open_history(paths_.state_dir + "/history.db");
  if (!history) Log(fmt::format("{}: GPU history and usage records are not stored", history.error().message));
  std::shared_ptr<lease::LeaseDir> dir;
  if (auto opened = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config_.lease_dir), clock_))
    dir = std::make_shared<lease::LeaseDir>(std::move(opened).value());
  else
    Log(fmt::format("telemetry: {}: jobs' usage is not metered", opened.error().message));
  LeaseSource leases{[dir] { return dir ? dir->Read().leases : std::vector<lease::LeaseRecord>{}; },
                     [dir](const std::string& name) { return dir ? dir->ReadLease(name) : std::nullopt; }};
  SamplerSettings settings;
  settings.interval_s = config_.telemetry_interval_s;
  settings.keep_s = {config_.telemetry_keep_10s_s, config_.telemetry_keep_1m_s};
  settings.records_keep_s = config_.telemetry_keep_records_s;
  settings.hpc_job_mapping_dir = config_.telemetry_hpc_job_mapping_dir;
  settings.state_dir = paths_.state_dir;
  settings.disk_space = [dir = paths_.state_dir] { return DiskSpaceOf(dir); };
  settings.history_floor = {config_.daemon_history_min_free_bytes, config_.daemon_history_min_free_pct};
  telemetry::AnomalySettings& a = settings.anomaly;
  a.idle_util_pct = config_.anomaly_idle_util_pct;
  a.idle_after_s = config_.anomaly_idle_after_s;
  a.stuck_util_pct = config_.anomaly_stuck_util_pct;
  a.stuck_after_s = config_.anomaly_stuck_after_s;
  a.leak_window_s = config_.anomaly_leak_window_s;
  a.leak_min_growth_bytes = config_.anomaly_leak_min_growth_bytes;
  a.ghost_min_bytes = config_.anomaly_ghost_min_bytes;
  a.ghost_after_s = config_.anomaly_ghost_after_s;
  a.throttle_after_s = config_.anomaly_throttle_after_s;
  a.xid_clear_after_s = config_.anomaly_xid_clear_after_s;
  a.idle_cancel_after_s = config_.anomaly_idle_action == "cancel" ? config_.anomaly_idle_cancel_after_s : 0;
  a.memory_guard = {config_.memory_margin_bytes, config_.anomaly_overuse_grace_s};
  sampler_ = std::make_unique<SamplerThread>(settings, std::move(backend).value(), std::move(leases),
                                             history ? std::move(history).value() : nullptr, env_,
                                             [this](const std::string& line) { Log(line); });
}

Status Daemon::OpenSocket() {
  std::string dir = paths_.socket.substr(0, paths_.socket.rfind('/'));
  Status s = MakeDirs(dir, paths_.system ? 0755 : 0700);
  if (!s.ok()) return s;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (paths_.socket.size() >= sizeof addr.sun_path)
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("socket path {} is too long", paths_.socket));
  std::strcpy(addr.sun_path, paths_.socket.c_str());
  // A socket file nobody answers on is left over from a crash: replace it.
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    close(probe);
    return MakeError(ErrorKind::kUnavailable, fmt::format("another gpulane daemon listens on {}", paths_.socket));
  }
  close(probe);
  unlink(paths_.socket.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  mode_t old = umask(paths_.system ? 0111 : 0177);
  int rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (rc != 0 || listen(listen_fd_, 512) != 0)
    return MakeError(ErrorKind::kIo, fmt::format("cannot listen on {}: {}", paths_.socket, std::strerror(errno)));
  return Status::Ok();
}

void Daemon::UpdateStoreMarker() {
  auto max_id = store_->MaxId();
  if (!max_id || *max_id <= marked_max_id_) return;
  if (Status s = WriteStoreMarker(env_.files, paths_.state_dir + "/jobs.db", *max_id); !s.ok()) {
    Log("cannot update the job store's marker: " + s.error().message);
    return;
  }
  marked_max_id_ = *max_id;
}

void Daemon::Recover() {
  if (Status begun = jobs_->BeginRecover(); !begun.ok()) {
    Log("cannot load jobs: " + begun.error().message);
    return;
  }
  LoadJobs(settings_.load_before_listen_s);
  if (const auto& loading = jobs_->loading())
    Log(fmt::format("loading {} unfinished jobs ({} so far): clients are answered meanwhile, the job commands once done",
                    loading->total, loading->loaded));
}

// Loads parts of the unfinished jobs (JobTable::LoadRecoverPart) for about `budget_s` seconds;
// once the last is in, finishes the start as Recover always did (the supervisors' status read,
// launches decided on the whole table). A part the store refuses is tried again a second later.
void Daemon::LoadJobs(double budget_s) {
  const double start = clock_.MonotonicS();
  if (start < load_retry_at_s_) return;
  while (jobs_->loading() && clock_.MonotonicS() - start < budget_s) {
    auto done = jobs_->LoadRecoverPart(settings_.load_part_rows);
    if (!done) {
      if (load_error_ != done.error().message) Log("cannot load jobs (tried again every second): " + done.error().message);
      load_error_ = done.error().message;
      load_retry_at_s_ = clock_.MonotonicS() + 1;
      return;
    }
    if (!*done) continue;
    auto adopted = jobs_->FinishRecover();
    if (!adopted) {
      Log("cannot load jobs: " + adopted.error().message);
      return;
    }
    Log(fmt::format("started ({} mode): {} unfinished jobs, {} handed to supervisors before", paths_.system ? "system" : "user",
                    jobs_->active().size(), *adopted));
    schedule_needed_ = true;
  }
}

std::string Daemon::LoadingLine() const {
  const auto& loading = jobs_->loading();
  return fmt::format("the gpulane daemon has just started and is still loading its jobs ({} of {} read), so its queue is "
                     "not complete yet: try again in a few seconds (gpulane daemon status says how far it is)",
                     loading ? loading->loaded : 0, loading ? loading->total : 0);
}

int Daemon::Run() {
  Status s = Start();
  if (!s.ok()) {
    Say("gpulane daemon: error: {}\n", s.error().message);
    return ExitCodeFor(s.error().kind);
  }
  Loop();
  Stop();
  return 0;
}

Status Daemon::Start() {
  if (Status s = Setup(); !s.ok()) return s;
  auto log = [this](const std::string& line) { Log(line); };
  if (!jobs_->loading()) RunGuarded("launching jobs", [&] { jobs_->LaunchEligible(); }, log);
  RunGuarded("storing job updates", [&] { jobs_->FlushDirty(); }, log);
  last_tick_s_ = clock_.MonotonicS();
  return Status::Ok();
}

void Daemon::Stop() {
  auto log = [this](const std::string& line) { Log(line); };
  if (line_dir_) line_dir_->RemoveLineShares();  // no stale order once nobody keeps it current
  // Arrays being stored are finished first (a second at most, for 100,000 tasks) and answered.
  while (jobs_->storing_arrays())
    if (RunGuarded("storing arrays", [&] { StoreArrayParts(3600); }, log)) FailArrays();
  while (!cancels_.empty())  // and cancels in progress (a few seconds at most for 300,000 jobs)
    if (RunGuarded("cancelling in parts", [&] { CancelSlices(3600); }, log)) FailCancels();
  RunGuarded("writing replies", [&] { WriteAndClose(); }, log);
  web_.reset();  // stops gpulane-web
  unlink(paths_.socket.c_str());
  Log("stopped; running jobs go on under their supervisors");
}

int RunDaemon(bool user_mode, DaemonParts parts) {
  // Its own session, without a controlling terminal: no terminal's ^C or ^\ reaches it, and no
  // terminal it ever opens becomes its own (it opens them O_NOCTTY besides). Fails harmlessly
  // where it already leads a session (systemd) or leads a process group (started in a shell's
  // foreground, where ^C is meant to stop it).
  setsid();
  auto config = LoadConfig();
  if (!config) {
    Say("gpulane daemon: error: {}\n", config.error().message);
    return kExitUsage;
  }
  auto settings = SettingsFromEnvironment();
  if (!settings) {
    Say("gpulane daemon: error: {}\n", settings.error().message);
    return kExitUsage;
  }
  const DaemonPaths paths = user_mode ? UserPaths() : SystemPaths();
  if (Status safe = user_mode ? SecureUserPaths(paths, /*create=*/true) : Status::Ok(); !safe.ok()) {
    Say("gpulane daemon: error: {}\n", safe.error().message);
    return ExitCodeFor(safe.error().kind);
  }
  Daemon daemon(paths, *config, *settings, std::move(parts));
  return daemon.Run();
}

}  // namespace gpulane::daemon
