#pragma once
// Test support: run the real gpulane binary against the fake NVML, with state files that start
// from the snapshots recorded on real H200s (tests/fixtures) and that tests change while
// gpulane runs.
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulane::test {

using Env = std::map<std::string, std::string>;

/// What a finished gpulane run printed and how it ended.
struct RunResult {
  int exit_code = -1;  ///< exit status, or 128+signal when killed
  std::string out;
  std::string err;
};

/// Path of the gpulane binary under test.
std::string GpulaneBinary();
/// Path of a fake libnvidia-ml.so.1 variant: "current", "no_v3", "legacy" or "no_graphics"
/// (tests/fake_nvml/README.md).
std::string FakeNvmlLibrary(const std::string& variant = "current");
// Where this build keeps things: the build's own gpulane (no GPULANE_TEST_GPULANE override),
// gpulane-web, the dashboard's source folder (web/) and the tests' fixtures. Functions rather than
// the macros harness.cc is compiled with, so that no test file's compile line names the build
// folder (the same test file then compiles the same in every clone, and a compiler cache serves it).
std::string BuiltGpulane();
/// The gpulane-web beside GPULANE_TEST_GPULANE's binary when it names one, else the build's.
std::string WebBinary();
std::string WebSourceDir();
std::string FixturesDir();
/// The recorded 2 x H200 snapshot (tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json), with
/// its recorded pid replaced by `pid_for_process` (a pid the test controls, or an unused one).
nlohmann::json RecordedH200x2(std::uint32_t pid_for_process);
/// A pid that does not exist on this machine (a process in another PID namespace).
std::uint32_t UnusedPid();

/// A temporary folder holding a fake NVML state file and a lease directory; removed at the end.
class FakeMachine {
 public:
  explicit FakeMachine(nlohmann::json state, std::string variant = "current");
  ~FakeMachine();
  FakeMachine(const FakeMachine&) = delete;
  FakeMachine& operator=(const FakeMachine&) = delete;

  /// The state; call Save() after changing it.
  nlohmann::json& state() { return state_; }
  /// Writes the state atomically (temp file + rename), so a running gpulane sees old or new.
  void Save();
  /// The environment that points gpulane at this machine.
  Env env() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  nlohmann::json state_;
  std::string variant_;
  std::filesystem::path dir_;
};

/// Runs gpulane with `args`, the caller's environment plus `env` (a value of "\x01unset" removes a
/// variable), and waits for it. Times out (killing it) after `timeout_s`.
RunResult RunGpulane(const std::vector<std::string>& args, const Env& env, double timeout_s = 30);

/// A gpulane (or other) process started in the background, its output captured to files.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const Env& env);
  ~Child();
  Child(Child&&) noexcept;
  pid_t pid() const { return pid_; }
  /// Waits up to `timeout_s`; returns the result, or nullopt on time-out (still running).
  std::optional<RunResult> Wait(double timeout_s);
  /// Sends a signal to the process.
  void Kill(int sig);
  /// What it has written to stderr so far.
  std::string ErrSoFar() const;
  std::string OutSoFar() const;

 private:
  pid_t pid_ = -1;
  std::filesystem::path out_path_, err_path_;
  std::optional<RunResult> result_;
};

/// Starts `sleep` (or another command) and returns its pid; the process ends with the test.
Child StartProcess(const std::vector<std::string>& argv);

/// Reads a whole file ("" if missing).
std::string ReadFile(const std::filesystem::path& path);

/// Polls `predicate` every 5 ms until true or `timeout_s` passed; returns the last value.
bool Eventually(const std::function<bool()>& predicate, double timeout_s = 10);

}  // namespace gpulane::test
