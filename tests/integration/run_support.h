#pragma once
// Helpers shared by the `gpulane run` tests (run_*_test.cc): idle machines, starting runs, jobs that
// hold their GPUs until the test opens a gate, reading the lease directory and the jobs' logs.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/units.h"

namespace gpulane::test {

using nlohmann::json;
namespace fs = std::filesystem;

/// `n` idle H200s cloned from the recorded one (no processes, nothing in use), in PCI order.
/// `total` replaces each GPU's memory size (all of it free).
inline json IdleMachine(unsigned n, std::optional<std::uint64_t> total = std::nullopt) {
  json state = RecordedH200x2(UnusedPid());
  const json base = RecordedIdleGpu();
  state["devices"] = json::array();
  for (unsigned i = 0; i < n; ++i) {
    json gpu = CloneGpu(base, MakeUuid(0xf0000000u + i), fmt::format("00000000:{:02X}:00.0", 0x18 + 0x10 * i), i);
    if (total) gpu["memory"] = {{"total", *total}};
    SetUsedMemory(gpu, 0);
    SetUtilization(gpu, 0);
    state["devices"].push_back(std::move(gpu));
  }
  return state;
}

/// The machine's environment, plus a config file of its own (absent until written) so that the
/// tester's ~/.config/gpulane does not change what the tests see, plus `extra`.
inline Env RunEnv(const FakeMachine& machine, const Env& extra = {}) {
  Env env = machine.env();
  env["GPULANE_CONFIG"] = (machine.dir() / "config.toml").string();
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

/// `gpulane run ARGS...` to the end.
inline RunResult RunOn(const FakeMachine& machine, std::vector<std::string> args, const Env& extra = {},
                     double timeout_s = 60) {
  args.insert(args.begin(), "run");
  return RunGpulane(args, RunEnv(machine, extra), timeout_s);
}

/// `gpulane run ARGS...` in the background (its pid is gpulane's: GPULANE_JOB_ID is "r<pid>").
inline Child StartRun(const FakeMachine& machine, std::vector<std::string> args, const Env& extra = {}) {
  args.insert(args.begin(), "run");
  args.insert(args.begin(), GpulaneBinary());
  return Child(args, RunEnv(machine, extra));
}

/// A file whose existence lets held jobs finish.
class Gate {
 public:
  explicit Gate(fs::path path) : path_(std::move(path)) {}
  std::string path() const { return path_.string(); }
  void Open() const { std::ofstream(path_) << "go\n"; }

 private:
  fs::path path_;
};

/// A job that appends "start <tag>" to `log`, waits for `gate`, then appends "end <tag>" (each
/// line a single O_APPEND write of the shell's `>>`).
inline std::vector<std::string> HeldJob(const std::string& tag, const std::string& log, const Gate& gate) {
  return {"/bin/sh", "-c",
          R"(echo "start $0 $CUDA_VISIBLE_DEVICES" >> "$1"; while [ ! -e "$2" ]; do sleep 0.02; done; )"
          R"(echo "end $0 $CUDA_VISIBLE_DEVICES" >> "$1")",
          tag, log, gate.path()};
}

/// The lines of the jobs' log that start with `word` ("start", "end").
inline std::vector<std::vector<std::string>> LogEvents(const fs::path& log) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& line : Lines(ReadFile(log))) {
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string w; words >> w;) fields.push_back(w);
    if (!fields.empty()) out.push_back(fields);
  }
  return out;
}

/// `a` followed by `b`.
inline std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Whether the job tagged `tag` logged its start in `log`.
inline bool Started(const fs::path& log, const std::string& tag) {
  for (const auto& e : LogEvents(log))
    if (e[0] == "start" && e.size() > 1 && e[1] == tag) return true;
  return false;
}

inline long CountEvents(const fs::path& log, const std::string& kind) {
  long n = 0;
  for (const auto& e : LogEvents(log)) n += e[0] == kind;
  return n;
}

/// The JSON of every regular *.lease / *.wait file of the lease directory (`suffix` ".lease" or
/// ".wait"), live or stale.
inline std::vector<json> LeaseDirRecords(const FakeMachine& machine, const std::string& suffix) {
  std::vector<json> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(machine.dir() / "leases", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
    auto j = json::parse(ReadFile(entry.path()), nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

/// Whether the gpulane with this pid has joined the line (holds a ticket or a lease).
inline bool HasTicketOrLease(const FakeMachine& machine, pid_t pid) {
  for (const char* suffix : {".wait", ".lease"})
    for (const json& j : LeaseDirRecords(machine, suffix))
      if (j.value("pid", 0) == pid) return true;
  return false;
}

/// Whether the background run has printed its waiting status.
inline bool SaysWaiting(const Child& run) { return Contains(run.ErrSoFar(), "gpulane: waiting, "); }

/// The last waiting status line it printed.
inline std::string LastStatus(const Child& run) {
  std::string last;
  for (const std::string& line : Lines(run.ErrSoFar()))
    if (line.rfind("gpulane: waiting, ", 0) == 0) last = line;
  return last;
}

/// Whether a process exists (a zombie counts: it is not gone yet).
inline bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

/// A gpulane error: exit `code`, nothing on stdout, exactly one line on stderr that is
/// "gpulane: error: ..." and contains `part`.
inline ::testing::AssertionResult IsError(const RunResult& r, int code, const std::string& part) {
  if (r.exit_code == code && r.out.empty() && LineCount(r.err) == 1 && r.err.rfind("gpulane: error: ", 0) == 0 &&
      Contains(r.err, part))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected exit " << code << ", no stdout and one error line containing '"
                                       << part << "'; got exit " << r.exit_code << ", stdout '" << r.out
                                       << "', stderr '" << r.err << "'";
}

/// The job's environment as `env` printed it.
inline std::map<std::string, std::string> ParseEnv(const std::string& text) {
  std::map<std::string, std::string> out;
  for (const std::string& line : Lines(text)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace gpulane::test
