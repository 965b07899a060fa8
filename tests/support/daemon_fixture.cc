#include "support/daemon_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "support/scenarios.h"

extern char** environ;

namespace gpulane::test {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kTagVariable = "GPULANE_TEST_DAEMON_TAG";

std::string SetprivPath() {
  for (const char* p : {"/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

std::string EnvPath() {
  for (const char* p : {"/usr/bin/env", "/bin/env"})
    if (access(p, X_OK) == 0) return p;
  return "/usr/bin/env";
}

// The NUL-separated strings of /proc/<pid>/<what> ("cmdline", "environ").
std::vector<std::string> ProcStrings(pid_t pid, const char* what) {
  std::string text = ReadFile(fmt::format("/proc/{}/{}", pid, what));
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<pid_t> AllPids() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end && *end == '\0' && pid > 0 && pid != getpid()) out.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return out;
}

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

json IdleGpus(unsigned n) {
  json state = RecordedH200x2(UnusedPid());
  const json base = RecordedIdleGpu();
  state["devices"] = json::array();
  for (unsigned i = 0; i < n; ++i) {
    json gpu = CloneGpu(base, MakeUuid(0xd0000000u + i), fmt::format("00000000:{:02X}:00.0", 0x18 + 0x10 * i), i);
    SetUsedMemory(gpu, 0);
    SetUtilization(gpu, 0);
    state["devices"].push_back(std::move(gpu));
  }
  return state;
}

::testing::AssertionResult IsGpulaneError(const RunResult& r, int code, const std::string& part) {
  std::size_t newlines = 0;
  for (char c : r.err) newlines += c == '\n';
  if (r.exit_code == code && r.out.empty() && newlines == 1 && r.err.back() == '\n' &&
      r.err.rfind("gpulane: error: ", 0) == 0 && r.err.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected exit " << code << ", no stdout and one error line containing '"
                                       << part << "'; got exit " << r.exit_code << ", stdout '" << r.out
                                       << "', stderr '" << r.err << "'";
}

std::vector<std::string> MarkedJob(const std::string& log, const std::string& gate, int exit_code, double sleep_s) {
  std::string wait = gate.empty() ? fmt::format("sleep {}", sleep_s)
                                  : "while [ ! -e \"$2\" ]; do sleep 0.05; done";
  return {"/bin/sh", "-c",
          "echo \"start $GPULANE_JOB_ID $(date +%s.%N) $CUDA_VISIBLE_DEVICES\" >> \"$1\"; " + wait +
              "; echo \"end $GPULANE_JOB_ID $(date +%s.%N) $CUDA_VISIBLE_DEVICES\" >> \"$1\"; exit $3",
          "marked-job", log, gate, std::to_string(exit_code)};
}

std::vector<Mark> ReadMarks(const fs::path& log) {
  std::vector<Mark> out;
  std::istringstream lines(ReadFile(log));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    Mark m;
    words >> m.kind >> m.id >> m.time >> m.gpus;
    if (!m.kind.empty()) out.push_back(m);
  }
  return out;
}

int CountMarks(const std::vector<Mark>& marks, const std::string& kind, std::int64_t id) {
  int n = 0;
  for (const auto& m : marks) n += m.kind == kind && m.id == id;
  return n;
}

void Touch(const fs::path& path) { std::ofstream(path) << "go\n"; }

// ---- Users ------------------------------------------------------------------------------------

bool CanSwitchUsers() { return geteuid() == 0 && !SetprivPath().empty(); }

std::optional<TestUser> EnsureTestUser(const std::string& name, std::string* why) {
  auto lookup = [&]() -> std::optional<TestUser> {
    struct passwd pw;
    struct passwd* found = nullptr;
    char buf[4096];
    if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || !found) return std::nullopt;
    return TestUser{name, found->pw_uid, found->pw_gid};
  };
  if (auto user = lookup()) return user;
  if (geteuid() != 0) {
    *why = "not root: cannot create user " + name;
    return std::nullopt;
  }
  // Tests run in parallel processes: one creates the user at a time.
  int lock = open("/tmp/gpulane-test-useradd.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) flock(lock, LOCK_EX);
  std::optional<TestUser> user = lookup();
  if (!user) {
    std::vector<std::string> tried;
    for (const char* useradd : {"/usr/sbin/useradd", "/sbin/useradd", "/usr/bin/useradd"}) {
      if (access(useradd, X_OK) != 0) continue;
      Child add({useradd, "-M", "-N", "-r", "-s", "/usr/sbin/nologin", "-c", "gpulane tests", name}, {});
      auto r = add.Wait(60);
      if (r && r->exit_code == 0) break;
      tried.push_back(fmt::format("{} failed: {}", useradd, r ? r->err : "time-out"));
    }
    user = lookup();
    if (!user) *why = "cannot create user " + name + (tried.empty() ? ": no useradd" : ": " + tried.front());
  }
  if (lock >= 0) close(lock);
  return user;
}

std::optional<std::string> TwoTestUsers(TestUser* a, TestUser* b) {
  if (!CanSwitchUsers()) return "needs root and setpriv (util-linux) to act as two users";
  std::string why;
  auto first = EnsureTestUser("gpulane-test-a", &why);
  if (!first) return why;
  auto second = EnsureTestUser("gpulane-test-b", &why);
  if (!second) return why;
  *a = *first;
  *b = *second;
  return std::nullopt;
}

// ---- Raw connections --------------------------------------------------------------------------

std::string Frame(const std::string& payload) {
  std::uint32_t n = static_cast<std::uint32_t>(payload.size());
  std::string out = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
  return out + payload;
}

RawConnection::RawConnection(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) return;
  std::strcpy(addr.sun_path, socket_path.c_str());
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

bool RawConnection::Send(const std::string& bytes) {
  std::size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return fd_ >= 0;
}

bool RawConnection::SendFrame(const std::string& payload) { return Send(Frame(payload)); }

void RawConnection::ShutdownWrite() {
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

std::optional<json> RawConnection::Read(double timeout_s) {
  auto payload = ReadPayload(timeout_s);
  if (!payload) return std::nullopt;
  json j = json::parse(*payload, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<std::string> RawConnection::ReadPayload(double timeout_s) {
  const double deadline = Seconds() + timeout_s;
  while (fd_ >= 0) {
    if (buffer_.size() >= 4) {
      const auto* b = reinterpret_cast<const unsigned char*>(buffer_.data());
      std::size_t n = (std::size_t{b[0]} << 24) | (std::size_t{b[1]} << 16) | (std::size_t{b[2]} << 8) | b[3];
      if (buffer_.size() >= 4 + n) {
        std::string payload = buffer_.substr(4, n);
        buffer_.erase(0, 4 + n);
        return payload;
      }
    }
    const double left = deadline - Seconds();
    if (left <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
    char buf[65536];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
  return std::nullopt;
}

bool RawConnection::Readable() {
  if (fd_ < 0) return false;
  if (!buffer_.empty()) return true;
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

bool RawConnection::ClosedByPeer(double timeout_s) {
  const double deadline = Seconds() + timeout_s;
  while (fd_ >= 0) {
    const double left = deadline - Seconds();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
    char buf[65536];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == ECONNRESET;
    if (n == 0) return true;
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
  return false;
}

std::unique_ptr<RawConnection> ConnectAs(const std::string& socket_path, const TestUser& user) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::make_unique<RawConnection>(-1);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  const pid_t child = fork();
  if (child == 0) {  // only system calls from here: the test process has threads
    close(pair[0]);
    if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, user.gid, user.gid, user.gid) != 0 ||
        syscall(SYS_setresuid, user.uid, user.uid, user.uid) != 0)
      _exit(1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(2);
    char byte = 'x';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
    _exit(sendmsg(pair[1], &msg, 0) == 1 ? 0 : 3);
  }
  close(pair[1]);
  int fd = -1;
  if (child > 0) {
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(pair[0], &msg, MSG_CMSG_CLOEXEC) == 1)
      if (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg && cmsg->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
    waitpid(child, nullptr, 0);
  }
  close(pair[0]);
  return std::make_unique<RawConnection>(fd);
}

// ---- The daemon -------------------------------------------------------------------------------

TestDaemon::TestDaemon(DaemonOptions options) : options_(std::move(options)) {
  machine_ = std::make_unique<FakeMachine>(options_.state ? *options_.state : IdleGpus(2));
  tag_ = dir().string();
  fs::create_directories(work());
  if (options_.system_mode) {
    // Other users reach the socket and their own folders under work().
    fs::permissions(dir(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(work(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(dir() / "nvml.json", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                             fs::perms::others_read);
  }
  // The daemon's sampler (telemetry: history, accounting, the usage line at the end of each job's log)
  // only where a test asks for it with a [telemetry] table: the other tests check jobs' logs byte
  // for byte and do not want a sampler reading the fake NVML every second beside them.
  std::string config = options_.config;
  if (config.find("[telemetry]") == std::string::npos) config += "\n[telemetry]\nenabled = false\n";
  // Nor gpulane-web (HTTP on a fixed port) unless a test asks with a [web] table.
  if (config.find("[web]") == std::string::npos) config += "\n[web]\nlisten = \"off\"\n";
  std::ofstream(dir() / "config.toml") << config;
  if (options_.start) Start();
}

TestDaemon::~TestDaemon() {
  if (::testing::Test::HasFailure()) {
    // The last lines of the logs (a test with 10,000 jobs logs as many lines).
    auto tail = [](const std::string& text) {
      std::size_t pos = text.size();
      for (int lines = 0; pos > 0 && lines <= 60; --pos) lines += text[pos - 1] == '\n';
      return text.substr(pos);
    };
    std::cerr << "---- daemon log (end) ----\n" << tail(Log()) << "---- supervisor log (end) ----\n"
              << tail(ReadFile(state_dir() / "supervisor.log")) << "----\n";
  }
  KillEverything();
}

Env TestDaemon::env(const Env& extra) const {
  Env env = machine_->env();
  env["GPULANE_SOCKET"] = socket();
  env["GPULANE_STATE_DIR"] = state_dir().string();
  env["GPULANE_CONFIG"] = (dir() / "config.toml").string();
  env[kTagVariable] = tag_;
  env["XDG_CONFIG_HOME"] = (dir() / "xdg-config").string();
  // Clients of a system-mode daemon see it installed (wait for it, never start their own).
  env["GPULANE_SYSTEM_DAEMON"] = options_.system_mode ? "1" : "0";
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

bool TestDaemon::Start() {
  std::vector<std::string> argv = {GpulaneBinary(), "daemon"};
  if (!options_.system_mode) argv.push_back("--user");
  daemons_.push_back(std::make_unique<Child>(argv, env(options_.daemon_env)));
  Child& daemon = *daemons_.back();
  const double deadline = Seconds() + 30;
  while (Seconds() < deadline) {
    if (auto ended = daemon.Wait(0)) {
      ADD_FAILURE() << "the daemon exited with " << ended->exit_code << ": " << ended->err;
      return false;
    }
    RawConnection c(socket());
    if (c.connected() && c.SendFrame(R"({"v":2,"op":"ping"})")) {
      if (auto reply = c.Read(5); reply && reply->value("ok", false)) {
        pid_ = reply->value("pid", -1);
        if (pid_ != daemon.pid()) ADD_FAILURE() << "another daemon answers on " << socket() << ": " << reply->dump();
        return pid_ == daemon.pid();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the daemon did not answer a ping within 30 s: " << daemon.ErrSoFar();
  return false;
}

void TestDaemon::Kill9() {
  if (daemons_.empty()) return;
  Child& daemon = *daemons_.back();
  daemon.Kill(SIGKILL);
  if (!daemon.Wait(30)) ADD_FAILURE() << "the daemon did not end after SIGKILL";
  pid_ = -1;
}

std::optional<int> TestDaemon::WaitForExit(double timeout_s) {
  if (daemons_.empty()) return std::nullopt;
  auto r = daemons_.back()->Wait(timeout_s);
  if (!r) return std::nullopt;
  pid_ = -1;
  return r->exit_code;
}

pid_t TestDaemon::pid() const { return pid_; }

std::string TestDaemon::Log() const {
  std::string out;
  for (const auto& d : daemons_) out += d->ErrSoFar();
  return out;
}

RunResult TestDaemon::Gpulane(const std::vector<std::string>& args, const Env& extra, double timeout_s,
                              const std::string& cwd) const {
  std::vector<std::string> argv = {EnvPath(), "-C", cwd.empty() ? work().string() : cwd, GpulaneBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Child child(argv, env(extra));
  auto result = child.Wait(timeout_s);
  if (!result) {
    child.Kill(SIGKILL);
    result = child.Wait(5);
    if (result) result->err += "\n[test: killed after time-out]";
  }
  return result.value_or(RunResult{});
}

fs::path TestDaemon::UserDir(const TestUser& user) const {
  fs::path d = work() / user.name;
  if (!fs::exists(d)) {
    fs::create_directories(d);
    if (chown(d.c_str(), user.uid, user.gid) != 0) ADD_FAILURE() << "chown " << d << ": " << std::strerror(errno);
  }
  return d;
}

RunResult TestDaemon::GpulaneAs(const TestUser& user, const std::vector<std::string>& args, const Env& extra,
                                double timeout_s) const {
  Child child = StartGpulaneAs(user, args, extra);
  auto result = child.Wait(timeout_s);
  if (!result) {
    child.Kill(SIGKILL);
    result = child.Wait(5);
    if (result) result->err += "\n[test: killed after time-out]";
  }
  return result.value_or(RunResult{});
}

Child TestDaemon::StartGpulaneAs(const TestUser& user, const std::vector<std::string>& args, const Env& extra) const {
  std::vector<std::string> argv = {SetprivPath(), fmt::format("--reuid={}", user.uid), fmt::format("--regid={}", user.gid),
                                   "--clear-groups", "--", EnvPath(), "-C", UserDir(user).string(), GpulaneBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Env e = env(extra);
  e["USER"] = user.name;
  e["LOGNAME"] = user.name;
  e["HOME"] = UserDir(user).string();
  return Child(argv, e);
}

Child TestDaemon::StartGpulane(const std::vector<std::string>& args, const Env& extra) const {
  std::vector<std::string> argv = {EnvPath(), "-C", work().string(), GpulaneBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Child(argv, env(extra));
}

std::int64_t TestDaemon::Submit(const std::vector<std::string>& args, const Env& extra) const {
  std::vector<std::string> argv = {"submit"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = Gpulane(argv, extra);
  char* end = nullptr;
  long long id = std::strtoll(r.out.c_str(), &end, 10);
  if (r.exit_code != 0 || id <= 0 || !end || *end != '\n') {
    ADD_FAILURE() << "gpulane submit failed: exit " << r.exit_code << ", stdout '" << r.out << "', stderr '" << r.err << "'";
    return -1;
  }
  return id;
}

json TestDaemon::Queue(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"queue", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = Gpulane(argv);
  json j = json::parse(r.out, nullptr, false);
  if (r.exit_code != 0 || !j.is_array()) {
    ADD_FAILURE() << "gpulane queue --json failed: exit " << r.exit_code << ", stderr '" << r.err << "'";
    return json::array();
  }
  return j;
}

json TestDaemon::Show(std::int64_t id) const {
  RunResult r = Gpulane({"show", "--json", std::to_string(id)});
  json j = json::parse(r.out, nullptr, false);
  if (j.is_array())  // an array's id: every task; the one numbered `id` is its first
    for (const auto& task : json(j)) if (task.value("id", std::int64_t{0}) == id) j = task;
  if (r.exit_code != 0 || !j.is_object()) {
    ADD_FAILURE() << "gpulane show --json " << id << " failed: exit " << r.exit_code << ", stderr '" << r.err << "'";
    return nullptr;
  }
  return j;
}

std::string TestDaemon::State(std::int64_t id) const {
  json reply = Call({{"op", "show"}, {"id", id}}, 10);
  if (!reply.value("ok", false)) return "";
  for (const auto& job : reply.value("jobs", json::array()))  // an array's id: every task
    if (job.value("id", std::int64_t{0}) == id) return job.value("state", "");
  return "";
}

bool TestDaemon::WaitForState(std::int64_t id, const std::string& state, double timeout_s) const {
  const double deadline = Seconds() + timeout_s;
  while (Seconds() < deadline) {
    if (State(id) == state) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return State(id) == state;
}

bool TestDaemon::WaitForReason(std::int64_t id, const std::string& part, double timeout_s) const {
  auto has = [&] { return Show(id).value("reason", "").find(part) != std::string::npos; };
  const double deadline = Seconds() + timeout_s;
  while (Seconds() < deadline) {
    if (has()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return has();
}

json TestDaemon::Call(json request, double timeout_s) const {
  if (!request.contains("v")) request["v"] = 2;
  RawConnection c(socket());
  if (!c.connected()) return {{"transport_error", "cannot connect to " + socket()}};
  if (!c.SendFrame(request.dump())) return {{"transport_error", "cannot send"}};
  auto reply = c.Read(timeout_s);
  if (!reply) return {{"transport_error", "no reply"}};
  return *reply;
}

json TestDaemon::SubmitRequest(const std::vector<std::string>& argv, bool hold, const std::vector<std::string>& env) const {
  // What `gpulane submit` run by Gpulane() would capture: this process's environment with env()'s changes.
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : this->env()) {
    if (v == "\x01unset") merged.erase(k);
    else merged[k] = v;
  }
  std::vector<std::string> environment;
  for (const auto& [k, v] : merged) environment.push_back(k + "=" + v);
  for (const auto& kv : env) environment.push_back(kv);
  json spec = {{"argv", argv}, {"cwd", work().string()}, {"env", environment}, {"request", {{"count", 1}}}};
  return {{"op", "submit"}, {"spec", spec}, {"hold", hold}};
}

bool TestDaemon::Barrier() const {
  json ping = Call({{"op", "ping"}}, 30);
  if (!ping.value("ok", false)) ADD_FAILURE() << "no answer to the barrier's ping: " << ping.dump();
  return ping.value("ok", false);
}

bool TestDaemon::RunJobNeedingEveryGpu() const {
  const std::size_t gpus = machine_->state()["devices"].size();
  const std::int64_t id = Submit({"-g", std::to_string(gpus), "--name", "every-gpu", "--", "true"});
  if (id < 0) return false;
  RunResult r = Gpulane({"wait", std::to_string(id)});
  if (r.exit_code != 0) ADD_FAILURE() << "the job needing every GPU did not complete: " << r.out << r.err;
  return r.exit_code == 0;
}

std::vector<pid_t> TestDaemon::JobPids() const {
  const fs::path gpulane = fs::weakly_canonical(GpulaneBinary());
  std::vector<pid_t> out;
  for (pid_t pid : TaggedPids()) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink(fmt::format("/proc/{}/exe", pid), ec);
    if (!ec && exe != gpulane) out.push_back(pid);  // unreadable: gone already
  }
  return out;
}

std::vector<pid_t> TestDaemon::SupervisorPids() const {
  const std::string jobs_dir = (state_dir() / "jobs").string();
  std::vector<pid_t> candidates;
  for (pid_t pid : AllPids()) {
    auto argv = ProcStrings(pid, "cmdline");
    if (argv.size() >= 3 && argv[1] == "_supervise" && argv[2] == jobs_dir) candidates.push_back(pid);
  }
  // A supervisor's fork for its job has the supervisor's command line until it execs: not one.
  std::vector<pid_t> out;
  for (pid_t pid : candidates) {
    const std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
    const auto close = stat.rfind(')');
    pid_t ppid = 0;
    if (close != std::string::npos) std::sscanf(stat.c_str() + close + 1, " %*c %d", &ppid);
    if (std::find(candidates.begin(), candidates.end(), ppid) == candidates.end()) out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> TestDaemon::TaggedPids() const {
  const std::string marker = std::string(kTagVariable) + "=" + tag_;
  std::vector<pid_t> out;
  for (pid_t pid : AllPids()) {
    for (const auto& kv : ProcStrings(pid, "environ"))
      if (kv == marker) {
        out.push_back(pid);
        break;
      }
  }
  return out;
}

std::vector<pid_t> TestDaemon::UserDaemonPids() const {
  std::vector<pid_t> out;
  for (pid_t pid : TaggedPids()) {
    auto argv = ProcStrings(pid, "cmdline");
    if (argv.size() == 3 && argv[1] == "daemon" && argv[2] == "--user") out.push_back(pid);
  }
  return out;
}

void TestDaemon::KillEverything() {
  for (auto& d : daemons_) d->Kill(SIGKILL);
  for (auto& d : daemons_) d->Wait(10);
  pid_ = -1;
  // Supervisors first (so none starts a job afterwards), then whatever carries the tag; again until
  // nothing is left.
  const double deadline = Seconds() + 20;
  while (Seconds() < deadline) {
    auto supervisors = SupervisorPids();
    for (pid_t pid : supervisors) kill(pid, SIGKILL);
    auto tagged = TaggedPids();
    for (pid_t pid : tagged) kill(pid, SIGKILL);
    if (supervisors.empty() && tagged.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace gpulane::test
