#include "support/harness.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace gpulane::test {
namespace fs = std::filesystem;

// GPULANE_TEST_GPULANE and GPULANE_TEST_FAKE_NVML_DIR point these tests at another build's gpulane
// and fake NVML (scripts/test-sanitizers.sh tsan: a ThreadSanitizer build of those two alone).
namespace {

// True when every folder above `file` lets other users through (o+x).
bool OthersCanReach(const fs::path& file) {
  for (fs::path dir = file.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
    if (dir == dir.root_path()) break;
  }
  return true;
}

// `file`, or where the tests' second users can run it: a clone in a folder of mode 0700 (a
// mktemp -d folder, a Debian 12 home) keeps them from the build, so the file is hard-linked (or
// copied) once into /tmp/gpulane-test-files/<dev>-<ino>-<mtime>/, shared by all test processes.
// Only root's tests have second users; as anyone else the file is used where it is.
std::string ReachableByOthers(const std::string& path) {
  static std::map<std::string, std::string> reachable;
  if (auto it = reachable.find(path); it != reachable.end()) return it->second;
  std::error_code ec;
  const fs::path file = fs::canonical(path, ec);
  if (ec || geteuid() != 0 || OthersCanReach(file)) return reachable[path] = path;
  struct stat st{};
  if (stat(file.c_str(), &st) != 0) return reachable[path] = path;
  const fs::path root = "/tmp/gpulane-test-files";
  fs::create_directory(root, ec);
  struct stat root_st{};
  if (lstat(root.c_str(), &root_st) != 0 || !S_ISDIR(root_st.st_mode) || root_st.st_uid != 0) return reachable[path] = path;
  chmod(root.c_str(), 0755);
  // gpulane comes with gpulane-web and the dashboard (web/) beside it: a new bundle is a new copy.
  const fs::path web_dir = file.parent_path() / "web";
  const bool with_web = fs::path(path).filename() == "gpulane" && fs::exists(file.parent_path() / "gpulane-web");
  std::string web_key;
  struct stat web_st{};
  if (with_web && stat((web_dir / "app.js").c_str(), &web_st) == 0)
    web_key = "-w" + std::to_string(web_st.st_mtim.tv_sec) + "." + std::to_string(web_st.st_mtim.tv_nsec);
  const fs::path dir = root / (std::to_string(st.st_dev) + "-" + std::to_string(st.st_ino) + "-" + std::to_string(st.st_mtim.tv_sec) +
                               "." + std::to_string(st.st_mtim.tv_nsec) + web_key);
  const fs::path target = dir / fs::path(path).filename();
  if (!fs::exists(target)) {
    const fs::path tmp = root / (".tmp-" + std::to_string(getpid()));
    fs::remove_all(tmp, ec);
    fs::create_directory(tmp, ec);
    chmod(tmp.c_str(), 0755);
    const fs::path staged = tmp / target.filename();
    fs::create_hard_link(file, staged, ec);
    if (ec) fs::copy_file(file, staged, ec);
    // gpulane's daemon starts the gpulane-web beside its binary, which serves the dashboard from
    // web/ beside itself: both come along.
    if (!ec && with_web) {
      std::error_code web_ec;
      fs::create_hard_link(file.parent_path() / "gpulane-web", tmp / "gpulane-web", web_ec);
      if (web_ec) fs::copy_file(file.parent_path() / "gpulane-web", tmp / "gpulane-web", web_ec);
      if (fs::exists(web_dir)) {
        fs::copy(web_dir, tmp / "web", fs::copy_options::recursive, web_ec);
        chmod((tmp / "web").c_str(), 0755);
      }
    }
    if (!ec && rename(tmp.c_str(), dir.c_str()) != 0) fs::remove_all(tmp, ec);  // another process was first
    if (!fs::exists(target)) return reachable[path] = path;
  }
  return reachable[path] = target.string();
}

}  // namespace

std::string GpulaneBinary() {
  const char* other = std::getenv("GPULANE_TEST_GPULANE");
  return ReachableByOthers(other && *other ? other : GPULANE_TEST_BINARY);
}

std::string BuiltGpulane() { return GPULANE_TEST_BINARY; }
std::string WebBinary() {
  // The gpulane-web beside GPULANE_TEST_GPULANE's gpulane (the sanitizer builds), as gpulane's
  // daemon takes the one beside its binary.
  const char* other = std::getenv("GPULANE_TEST_GPULANE");
  if (other && *other) {
    const fs::path beside = fs::path(other).parent_path() / "gpulane-web";
    if (fs::exists(beside)) return beside.string();
  }
  return GPULANE_TEST_WEB_BINARY;
}
std::string WebSourceDir() { return GPULANE_TEST_WEB_SOURCE_DIR; }
std::string FixturesDir() { return GPULANE_TEST_FIXTURES_DIR; }

std::string FakeNvmlLibrary(const std::string& variant) {
  const char* other = std::getenv("GPULANE_TEST_FAKE_NVML_DIR");
  return ReachableByOthers(std::string(other && *other ? other : GPULANE_TEST_FAKE_NVML_DIR) + "/" + variant +
                           "/libnvidia-ml.so.1");
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::uint32_t UnusedPid() {
  // pid_max is at most 4194304; walk down from the top for a pid nobody has.
  for (std::uint32_t pid = 4194000; pid > 1000; --pid)
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return pid;
  throw std::runtime_error("no unused pid");
}

nlohmann::json RecordedH200x2(std::uint32_t pid_for_process) {
  const fs::path path = fs::path(GPULANE_TEST_FIXTURES_DIR) / "h200x2-2026-11-30/nvml_snapshot.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing recorded fixture " + path.string() + " (tests/fixtures)");
  nlohmann::json doc = nlohmann::json::parse(in);
  for (auto& dev : doc["devices"])
    for (auto& p : dev["processes"]) p["pid"] = pid_for_process;
  return doc;
}

FakeMachine::FakeMachine(nlohmann::json state, std::string variant)
    : state_(std::move(state)), variant_(std::move(variant)) {
  std::string tmpl = (fs::temp_directory_path() / "gpulane-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  fs::create_directory(dir_ / "leases");
  fs::permissions(dir_ / "leases", fs::perms::all | fs::perms::sticky_bit);
  // The GPULANE_CONFIG of RunEnv and TestDaemon: there and empty (no settings) until a test writes
  // it; a file named by GPULANE_CONFIG that is missing is an error (docs/config.md).
  std::ofstream(dir_ / "config.toml");
  Save();
}

FakeMachine::~FakeMachine() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void FakeMachine::Save() {
  const fs::path tmp = dir_ / "nvml.json.tmp";
  {
    std::ofstream out(tmp);
    out << state_.dump(1);
  }
  fs::rename(tmp, dir_ / "nvml.json");
}

Env FakeMachine::env() const {
  return {{"GPULANE_NVML_LIBRARY", FakeNvmlLibrary(variant_)},
          {"FAKE_NVML_STATE", (dir_ / "nvml.json").string()},
          {"GPULANE_LEASE_DIR", (dir_ / "leases").string()},
          {"CUDA_VISIBLE_DEVICES", "\x01unset"},
          {"NO_COLOR", "1"},
          // Commands take GPU snapshots from a daemon on this socket when one listens there, else
          // read the fake NVML themselves; never from a daemon outside the test.
          {"GPULANE_SOCKET", (dir_ / "gpulane.sock").string()},
          {"GPULANE_STATE_DIR", (dir_ / "state").string()},
          // Whether a system daemon is installed is the test's choice, not this machine's
          // (/var/lib/gpulane, the enabled unit): none, unless a test says so.
          {"GPULANE_SYSTEM_DAEMON", "0"}};
}

namespace {

std::vector<std::string> BuildEnv(const Env& extra) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) {
    if (v == "\x01unset") merged.erase(k);
    else merged[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

pid_t Spawn(const std::vector<std::string>& argv, const Env& env, const fs::path& out, const fs::path& err) {
  std::vector<std::string> envs = BuildEnv(env);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  return pid;
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

fs::path TempFile(const char* stem) {
  static std::mt19937_64 rng{std::random_device{}()};
  return fs::temp_directory_path() / (std::string("gpulane-") + stem + "-" + std::to_string(rng()));
}

}  // namespace

Child::Child(const std::vector<std::string>& argv, const Env& env)
    : out_path_(TempFile("out")), err_path_(TempFile("err")) {
  pid_ = Spawn(argv, env, out_path_, err_path_);
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_), out_path_(std::move(other.out_path_)), err_path_(std::move(other.err_path_)),
      result_(std::move(other.result_)) {
  other.pid_ = -1;
}

Child::~Child() {
  if (pid_ > 0 && !result_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  std::error_code ec;
  if (!out_path_.empty()) fs::remove(out_path_, ec);
  if (!err_path_.empty()) fs::remove(err_path_, ec);
}

std::optional<RunResult> Child::Wait(double timeout_s) {
  if (result_) return result_;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      result_ = RunResult{DecodeStatus(status), ReadFile(out_path_), ReadFile(err_path_)};
      return result_;
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Child::Kill(int sig) {
  if (pid_ > 0 && !result_) ::kill(pid_, sig);
}

std::string Child::ErrSoFar() const { return ReadFile(err_path_); }
std::string Child::OutSoFar() const { return ReadFile(out_path_); }

RunResult RunGpulane(const std::vector<std::string>& args, const Env& env, double timeout_s) {
  std::vector<std::string> argv{GpulaneBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Child child(argv, env);
  auto result = child.Wait(timeout_s);
  if (!result) {
    child.Kill(SIGKILL);
    result = child.Wait(5);
    if (result) result->err += "\n[test harness: killed after time-out]";
  }
  return result.value_or(RunResult{});
}

Child StartProcess(const std::vector<std::string>& argv) {
  Child child(argv, {});
  // Until its exec the child is still this test program (its /proc comm and cmdline say so): a
  // test that reads the process's name right away must see argv[0]'s, so wait for the exec.
  const std::string cmdline = "/proc/" + std::to_string(child.pid()) + "/cmdline";
  if (!argv.empty() && !Eventually([&] { return ReadFile(cmdline).rfind(argv[0] + '\0', 0) == 0; }, 10))
    ADD_FAILURE() << "the process " << argv[0] << " did not start";
  return child;
}

bool Eventually(const std::function<bool()>& predicate, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return predicate();
}

}  // namespace gpulane::test
