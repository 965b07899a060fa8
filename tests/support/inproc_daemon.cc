// The in-process daemon of the tests (inproc_daemon.h).
#include "support/inproc_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "proto/wire.h"
#include "store/job_store.h"
#include "support/harness.h"
#include "support/recording_launcher.h"
#include "support/units.h"

namespace gpulane::test {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
  leases_.clear();  // before their directory's descriptor
  lease_dir_.reset();
  for (auto& [fd, client] : clients_) close(fd);
  if (capturing_log_) ::testing::internal::GetCapturedStderr();
  for (auto& [id, fd] : locks_) close(fd);
  sigprocmask(SIG_SETMASK, &saved_mask_, nullptr);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void InProcDaemonTest::StartDaemon() {
  Status started = TryStartDaemon();
  ASSERT_TRUE(started.ok()) << started.error().message;
}

Status InProcDaemonTest::TryStartDaemon() {
  daemon::DaemonParts parts;
  parts.env = real_clock_ ? &real_env_ : &env_;
  if (!gpus_.set()) gpus_.Set(IdleSnapshot(gpu_count_));
  parts.open_store = [](const std::string& path, int busy_ms) { return store::JobStore::Open(path, busy_ms); };
  parts.open_history = open_history_;
  parts.make_launcher = [this](const daemon::LaunchPlace&) -> std::unique_ptr<daemon::SupervisorLauncher> {
    auto launcher = std::make_unique<RecordingLauncher>();
    launcher->on_start = [this](std::int64_t id) { launched_.push_back(id); };
    launcher->on_signal = [this](std::int64_t id, int signal) { signalled_.emplace_back(id, signal); };
    return launcher;
  };
  daemon_ = std::make_unique<daemon::Daemon>(paths_, config_, settings_, std::move(parts));
  Status started = daemon_->Start();
  if (!started.ok()) daemon_.reset();
  return started;
}

std::vector<int> InProcDaemonTest::SignalsTo(std::int64_t id) const {
  std::vector<int> out;
  for (const auto& [job, signal] : signalled_)
    if (job == id) out.push_back(signal);
  return out;
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

std::vector<std::string> InProcDaemonTest::Exchange(const daemon::Peer& peer, const std::string& out, bool streamed) {
  int ends[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  std::size_t sent = 0;
  daemon_->AddConnection(ends[1], peer);
  proto::FrameReader reader(std::size_t{1} << 30);
  std::vector<std::string> frames;
  // Done: the reply (one frame), or a streamed reply's header and parts up to its empty frame (a
  // header that refuses is all there is).
  auto done = [&] {
    if (frames.empty()) return false;
    if (!streamed) return true;
    if (!json::parse(frames.front(), nullptr, false).value("ok", false)) return true;
    return frames.size() > 1 && frames.back().empty();
  };
  // Turned without waiting until the reply is whole; a bound of 60 s for a daemon that never
  // answers (a large request is parsed beside the loop, so turns alone are no bound).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    // What the socket's buffer takes now; a request larger than it goes on the next turns.
    if (sent < out.size()) {
      const ssize_t n = write(ends[0], out.data() + sent, out.size() - sent);
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    daemon_->Step(0);
    char buf[65536];
    for (ssize_t n; (n = read(ends[0], buf, sizeof buf)) > 0;) reader.Feed(buf, static_cast<std::size_t>(n));
    bool too_big = false;
    while (!done())
      if (auto frame = reader.Next(&too_big)) frames.push_back(std::move(*frame));
      else break;
  }
  close(ends[0]);  // the daemon closes its end on its next turns
  if (!done()) ADD_FAILURE() << "no whole reply to " << out.substr(4, 300) << " in 60 s";
  return frames;
}

std::string InProcDaemonTest::FrameOf(json request) {
  request["v"] = proto::kVersion;
  std::string out;
  proto::AppendFrame(request, out);
  return out;
}

std::string InProcDaemonTest::RawFrame(const std::string& payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  const std::string header = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                              static_cast<char>(n)};
  return header + payload;
}

int InProcDaemonTest::Connect(const daemon::Peer& peer) {
  int ends[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  daemon_->AddConnection(ends[1], peer);
  clients_[ends[0]];
  return ends[0];
}

int InProcDaemonTest::ConnectCapped(const daemon::Peer& peer) {
  int ends[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  if (daemon_->AdmitConnection(ends[1], peer.uid)) daemon_->AddConnection(ends[1], peer);
  clients_[ends[0]];
  return ends[0];
}

void InProcDaemonTest::Drain(int fd) {
  Client& c = clients_[fd];
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) c.reader.Feed(buf, static_cast<std::size_t>(n));
  if (n == 0) c.closed = true;
}

void InProcDaemonTest::Send(int fd, const std::string& bytes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = write(fd, bytes.data() + sent, bytes.size() - sent);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline || (n < 0 && errno != EAGAIN)) {
      ADD_FAILURE() << "could not send " << bytes.size() << " bytes: " << sent << " sent";
      return;
    }
    daemon_->Step(0);  // the daemon reads some; its replies are kept
    Drain(fd);
  }
}

std::optional<std::string> InProcDaemonTest::ReadPayload(int fd, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  Client& c = clients_[fd];
  bool too_big = false;
  for (;;) {
    Drain(fd);
    if (auto frame = c.reader.Next(&too_big)) return frame;
    if (c.closed || !daemon_ || std::chrono::steady_clock::now() > deadline) return std::nullopt;
    daemon_->Step(0);
  }
}

std::optional<json> InProcDaemonTest::Read(int fd, double timeout_s) {
  auto payload = ReadPayload(fd, timeout_s);
  if (!payload) return std::nullopt;
  return json::parse(*payload, nullptr, false);
}

bool InProcDaemonTest::Readable(int fd) {
  Drain(fd);
  const Client& c = clients_[fd];
  return c.reader.partial() || c.closed;
}

void InProcDaemonTest::Disconnect(int fd) {
  close(fd);
  clients_.erase(fd);
}

void InProcDaemonTest::ShutdownWrite(int fd) { EXPECT_EQ(shutdown(fd, SHUT_WR), 0); }

bool InProcDaemonTest::ClosedByDaemon(int fd, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    Drain(fd);
    if (clients_[fd].closed) return true;
    if (!daemon_ || std::chrono::steady_clock::now() > deadline) return false;
    daemon_->Step(0);
  }
}

json InProcDaemonTest::Call(const daemon::Peer& peer, json request) {
  std::vector<std::string> frames = Exchange(peer, FrameOf(std::move(request)), /*streamed=*/false);
  return frames.empty() ? json() : json::parse(frames.front());
}

json InProcDaemonTest::CallRaw(const daemon::Peer& peer, const std::string& payload) {
  std::vector<std::string> frames = Exchange(peer, RawFrame(payload), /*streamed=*/false);
  return frames.empty() ? json() : json::parse(frames.front(), nullptr, false);
}

json InProcDaemonTest::CallStreamed(const daemon::Peer& peer, json request, std::string* body) {
  std::vector<std::string> frames = Exchange(peer, FrameOf(std::move(request)), /*streamed=*/true);
  body->clear();
  for (std::size_t i = 1; i < frames.size(); ++i) *body += frames[i];
  return frames.empty() ? json() : json::parse(frames.front());
}

json InProcDaemonTest::SubmitRequest(const Submission& s) const {
  store::JobSpec spec;
  spec.argv = s.argv;
  spec.cwd = dir_.string();
  spec.env = s.env;
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
  return request;
}

std::vector<std::int64_t> InProcDaemonTest::Submit(const daemon::Peer& peer, const Submission& s, json* refused) {
  json reply = Call(peer, SubmitRequest(s));
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
  if (!reply.value("ok", false)) return json();
  if (reply.contains("job")) return reply["job"];
  for (const json& job : reply.value("jobs", json::array()))  // an array's id: every task, task 0 this id
    if (job.value("id", std::int64_t{0}) == id) return job;
  return json();
}

std::string InProcDaemonTest::State(std::int64_t id) {
  json job = ShowJob(id);
  return job.is_object() ? job.value("state", "") : "";
}

json InProcDaemonTest::Queue(const daemon::Peer& peer, const json& fields) {
  json request = fields;
  request["op"] = "queue";
  json reply = Call(peer, request);
  if (!reply.value("ok", false)) {
    ADD_FAILURE() << "queue refused: " << reply.dump();
    return json();
  }
  return reply["jobs"];
}

void InProcDaemonTest::WaitForSample() {
  const double at_s = clock_.WallS();
  // The sampler answers the questions it finds, then samples once the clock has passed its time:
  // the second answer at the latest is one given after that sample.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  json reply;
  do reply = Call(Root(), {{"op", "telemetry"}});
  while (reply.value("time_s", 0.0) < at_s && std::chrono::steady_clock::now() < deadline);
  if (reply.value("time_s", 0.0) < at_s) ADD_FAILURE() << "no sample taken at " << at_s << " in 10 s: " << reply.dump();
}

std::string InProcDaemonTest::HoldLease(lease::LeaseRecord record) {
  if (!lease_dir_) {
    auto dir = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config_.lease_dir), clock_);
    if (!dir) {
      ADD_FAILURE() << dir.error().message;
      return "";
    }
    lease_dir_ = std::make_unique<lease::LeaseDir>(std::move(dir).value());
  }
  if (record.pid == 0) record.pid = getpid();
  if (record.started_s == 0) record.started_s = clock_.WallS();
  auto held = lease_dir_->CreateLease(record);
  if (!held) {
    ADD_FAILURE() << held.error().message;
    return "";
  }
  const std::string name = held->name();
  leases_[name] = std::move(held).value();
  return name;
}

void InProcDaemonTest::ReleaseLease(const std::string& name) {
  auto it = leases_.find(name);
  ASSERT_NE(it, leases_.end()) << "no lease " << name << " held";
  it->second.Release();
  leases_.erase(it);
}

json InProcDaemonTest::Usage(const json& fields, const daemon::Peer& peer) {
  json request = fields;
  request["op"] = "usage";
  return Call(peer, request);
}

void InProcDaemonTest::CaptureLog() {
  if (!capturing_log_) ::testing::internal::CaptureStderr();
  capturing_log_ = true;
}

std::string InProcDaemonTest::Logged() {
  if (!capturing_log_) {
    ADD_FAILURE() << "Logged() without CaptureLog()";
    return "";
  }
  std::string text = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  return text;
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

namespace {
// Job `id`'s lock, taken as its supervisor takes it (or the one this test already holds).
int TakeLock(std::map<std::int64_t, int>& locks, const daemon::JobFiles& files, std::int64_t id) {
  if (auto it = locks.find(id); it != locks.end()) return it->second;
  int fd = open(files.lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "job " << id << "'s lock is free for its supervisor";
  locks[id] = fd;
  return fd;
}
}  // namespace

void InProcDaemonTest::Waiting(std::int64_t id, const std::string& reason) {
  daemon::JobFiles files(files_, paths_.state_dir + "/jobs", id);
  TakeLock(locks_, files, id);
  daemon::SupervisorStatus s;
  s.phase = "waiting";
  s.pid = static_cast<pid_t>(UnusedPid());
  s.reason = reason;
  s.marks_exec = true;
  ASSERT_TRUE(files.WriteStatus(s).ok());
}

void InProcDaemonTest::Running(std::int64_t id, std::vector<std::string> gpu_uuids) {
  daemon::JobFiles files(files_, paths_.state_dir + "/jobs", id);
  TakeLock(locks_, files, id);
  daemon::SupervisorStatus s;
  s.phase = "running";
  s.pid = static_cast<pid_t>(UnusedPid());  // no such process: a cancel's SIGTERM goes nowhere
  s.start_time = clock_.WallS();
  s.gpu_uuids = gpu_uuids.empty() ? std::vector<std::string>{IdleSnapshot(1).devices[0].uuid} : gpu_uuids;
  s.marks_exec = true;
  ASSERT_TRUE(files.WriteStatus(s).ok());
}

void InProcDaemonTest::Done(std::int64_t id, int exit_code, const std::function<void(daemon::SupervisorStatus&)>& edit) {
  daemon::JobFiles files(files_, paths_.state_dir + "/jobs", id);
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
