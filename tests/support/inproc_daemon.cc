// The in-process daemon of the tests (inproc_daemon.h).
#include "support/inproc_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/wire.h"
#include "store/job_store.h"
#include "support/harness.h"
#include "support/recording_launcher.h"

namespace gpulane::test {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

class FakeGpus final : public GpuBackend {
 public:
  explicit FakeGpus(GpuSnapshot snapshot) : snapshot_(std::move(snapshot)) {}
  Result<GpuSnapshot> Read(const ReadOptions&) override { return snapshot_; }
  using GpuBackend::Read;

 private:
  GpuSnapshot snapshot_;
};

}  // namespace

GpuSnapshot IdleSnapshot(unsigned n) {
  GpuSnapshot s;
  for (unsigned i = 0; i < n; ++i) {
    GpuDevice d;
    d.pci_index = d.nvml_index = i;
    d.uuid = "GPU-" + std::to_string(i) + "0000000-0000-0000-0000-000000000000";
    d.pci_bus_id = "00000000:0" + std::to_string(i) + ":00.0";
    d.name = "NVIDIA H100 80GB HBM3";
    d.memory_total_bytes = 80 * kGiB;
    d.memory_free_bytes = 80 * kGiB;
    d.memory_used_bytes = 0;
    d.utilization_gpu_pct = 0;
    d.processes = std::vector<GpuProcess>{};
    s.devices.push_back(d);
  }
  return s;
}

daemon::Peer PeerOf(std::uint32_t uid, const std::string& user, bool admin) {
  daemon::Peer p;
  p.uid = uid;
  p.gid = uid;
  p.pid = static_cast<pid_t>(UnusedPid());
  p.user = user;
  p.admin = admin;
  return p;
}

daemon::Peer Root() { return PeerOf(0, "root", true); }

void InProcDaemonTest::SetUp() {
  // In memory where there is a tmpfs: the store's and the job files' fsyncs are most of a test's
  // time on a disk (a real SQLite file all the same).
  std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm/gpulane-inproc-XXXXXX" : "/tmp/gpulane-inproc-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  dir_ = dir;
  paths_.state_dir = (dir_ / "state").string();
  paths_.socket = (dir_ / "run" / "gpulane.sock").string();
  paths_.system = false;
  config_.web_listen = "off";           // no gpulane-web child
  config_.telemetry_enabled = false;   // no sampler thread
  config_.lease_dir = (dir_ / "leases").string();
  // Setup blocks the stop signals in this thread for its signalfd; the test's own mask comes back.
  sigprocmask(SIG_SETMASK, nullptr, &saved_mask_);
}

void InProcDaemonTest::TearDown() {
  daemon_.reset();
  for (auto& [id, fd] : locks_) close(fd);
  sigprocmask(SIG_SETMASK, &saved_mask_, nullptr);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void InProcDaemonTest::StartDaemon() {
  daemon::DaemonParts parts;
  parts.env = &env_;
  const GpuSnapshot gpus = IdleSnapshot(gpu_count_);
  parts.open_gpus = [gpus]() -> Result<std::unique_ptr<GpuBackend>> { return std::unique_ptr<GpuBackend>(new FakeGpus(gpus)); };
  parts.open_store = [](const std::string& path, int busy_ms) { return store::JobStore::Open(path, busy_ms); };
  parts.make_launcher = [this](const daemon::LaunchPlace&) -> std::unique_ptr<daemon::SupervisorLauncher> {
    auto launcher = std::make_unique<RecordingLauncher>();
    launcher->on_start = [this](std::int64_t id) { launched_.push_back(id); };
    return launcher;
  };
  daemon_ = std::make_unique<daemon::Daemon>(paths_, config_, settings_, std::move(parts));
  Status started = daemon_->Start();
  ASSERT_TRUE(started.ok()) << started.error().message;
}

void InProcDaemonTest::Restart() {
  daemon_->Stop();
  daemon_.reset();
  StartDaemon();
}

void InProcDaemonTest::Crash() { daemon_.reset(); }

void InProcDaemonTest::Turn(int turns) {
  for (int i = 0; i < turns; ++i) daemon_->Step(0);
}

json InProcDaemonTest::Call(const daemon::Peer& peer, json request) {
  request["v"] = proto::kVersion;
  int ends[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  std::string out;
  proto::AppendFrame(request, out);
  EXPECT_EQ(write(ends[0], out.data(), out.size()), static_cast<ssize_t>(out.size())) << "a request fits the socket's buffer";
  daemon_->AddConnection(ends[1], peer);
  proto::FrameReader reader(std::size_t{1} << 30);
  std::optional<std::string> frame;
  for (int turn = 0; turn < 1000 && !frame; ++turn) {
    daemon_->Step(0);
    char buf[65536];
    for (ssize_t n; (n = read(ends[0], buf, sizeof buf)) > 0;) reader.Feed(buf, static_cast<std::size_t>(n));
    bool too_big = false;
    frame = reader.Next(&too_big);
  }
  close(ends[0]);  // the daemon closes its end on its next turns
  if (!frame) {
    ADD_FAILURE() << "no reply to " << request.dump() << " in 1,000 turns";
    return json();
  }
  return json::parse(*frame);
}

std::vector<std::int64_t> InProcDaemonTest::Submit(const daemon::Peer& peer, const Submission& s, json* refused) {
  store::JobSpec spec;
  spec.argv = s.argv;
  spec.cwd = dir_.string();
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.name = s.name;
  spec.request.count = s.gpus;
  spec.request.priority = s.priority;
  spec.retries = s.retries;
  spec.request.time_limit_s = s.time_limit_s;
  spec.request.preemptible = s.preemptible;
  std::vector<sched::JobRef> ok, any;
  for (auto id : s.after_ok) ok.push_back({id, std::nullopt});
  for (auto id : s.after_any) any.push_back({id, std::nullopt});
  spec.after_ok = ok;
  spec.after_any = any;
  json request = {{"op", "submit"}, {"hold", s.hold}, {"spec", store::SpecToJson(spec)}};
  if (!s.array.empty()) request["array"] = s.array;
  json reply = Call(peer, request);
  if (!reply.value("ok", false)) {
    if (refused) *refused = reply;
    else ADD_FAILURE() << "submit refused: " << reply.dump();
    return {};
  }
  return reply["ids"].get<std::vector<std::int64_t>>();
}

json InProcDaemonTest::Control(const daemon::Peer& peer, const std::string& op, const std::vector<std::int64_t>& ids) {
  return Call(peer, {{"op", op}, {"ids", ids}});
}

json InProcDaemonTest::ShowJob(std::int64_t id) {
  json reply = Call(Root(), {{"op", "show"}, {"id", id}});
  return reply.value("ok", false) ? reply["job"] : json();
}

std::string InProcDaemonTest::State(std::int64_t id) {
  json job = ShowJob(id);
  return job.is_object() ? job.value("state", "") : "";
}

std::string InProcDaemonTest::StoredState(std::int64_t id) {
  auto store = store::JobStore::Open(paths_.state_dir + "/jobs.db");
  if (!store) {
    ADD_FAILURE() << store.error().message;
    return "";
  }
  auto job = (*store)->Get(id);
  return job && *job ? store::StateName((**job).state) : "";
}

void InProcDaemonTest::Running(std::int64_t id, std::vector<std::string> gpu_uuids) {
  daemon::JobFiles files(paths_.state_dir + "/jobs", id);
  int fd = open(files.lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "job " << id << "'s lock is free for its supervisor";
  locks_[id] = fd;
  daemon::SupervisorStatus s;
  s.phase = "running";
  s.pid = static_cast<pid_t>(UnusedPid());  // no such process: a cancel's SIGTERM goes nowhere
  s.start_time = clock_.WallS();
  s.gpu_uuids = gpu_uuids.empty() ? std::vector<std::string>{IdleSnapshot(1).devices[0].uuid} : gpu_uuids;
  s.marks_exec = true;
  ASSERT_TRUE(files.WriteStatus(s).ok());
}

void InProcDaemonTest::Done(std::int64_t id, int exit_code, const std::function<void(daemon::SupervisorStatus&)>& edit) {
  daemon::JobFiles files(paths_.state_dir + "/jobs", id);
  auto s = files.ReadStatus();
  ASSERT_TRUE(s) << "job " << id << " was reported running first";
  s->phase = "done";
  s->exit_code = exit_code;
  s->end_time = clock_.WallS();
  if (edit) edit(*s);
  ASSERT_TRUE(files.WriteStatus(*s).ok());
  Vanish(id);
}

void InProcDaemonTest::Vanish(std::int64_t id) {
  if (auto it = locks_.find(id); it != locks_.end()) {
    close(it->second);
    locks_.erase(it);
  }
}

}  // namespace gpulane::test
