// Amplification (issue 9, item 4): an array whose large environment was copied into every task (a
// 1 MiB environment times 1,000 tasks was 1 GB of memory and 2 GB of jobs.db), and environments
// and command lines of any size. An array's spec is stored once; larger ones are refused in a line.
// Only the daemon's resident-memory bound is tested here, through the binary: CI runs the in-process
// tests under ASan alone, whose shadow memory hides it, and this test runs against the normal build
// (scripts/test-sanitizers.sh MEMORY_BOUNDS). The rest, and this one's other checks, are in-process:
// tests/unit/daemon_inproc_bulk_test.cc.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <numeric>
#include <vector>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Kilobytes of a /proc/<pid>/status field ("VmRSS", "VmHWM").
long StatusKib(pid_t pid, const std::string& field) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

// The bytes of the database and its write-ahead log.
std::uintmax_t StoreBytes(const TestDaemon& d) {
  std::uintmax_t bytes = 0;
  for (const char* name : {"jobs.db", "jobs.db-wal"})
    if (fs::exists(d.state_dir() / name)) bytes += fs::file_size(d.state_dir() / name);
  return bytes;
}

// A held submission of `argv` whose environment is padded with variables of 100 KiB to `env_bytes`
// in all (as execve counts: each string with its NUL).
json PaddedSubmit(const TestDaemon& d, std::size_t env_bytes, const std::vector<std::string>& argv = {"true"}) {
  json request = d.SubmitRequest(argv, /*hold=*/true);
  std::size_t bytes = 0;
  for (const auto& e : request["spec"]["env"]) bytes += e.get<std::string>().size() + 1;
  for (int i = 0; bytes < env_bytes; ++i) {
    const std::string name = fmt::format("PAD{}=", i);
    const std::size_t value = std::min<std::size_t>(100u << 10, env_bytes - bytes - name.size() - 1);
    request["spec"]["env"].push_back(name + std::string(value, 'e'));
    bytes += name.size() + value + 1;
  }
  return request;
}

TEST(DaemonAmplification, AMebibyteEnvironmentTimesAThousandTasksIsStoredOnce) {
  TestDaemon d;
  const long rss_before_kib = StatusKib(d.pid(), "VmRSS");
  json request = PaddedSubmit(d, (1u << 20) - 1024);
  std::vector<int> indices(1000);
  std::iota(indices.begin(), indices.end(), 0);
  request["array"] = indices;
  const double start = Seconds();
  json reply = d.Call(request, 120);
  ASSERT_EQ(reply.value("ok", false), true) << reply.dump().substr(0, 400);
  ASSERT_EQ(reply["ids"].size(), 1000u);
  const double took = Seconds() - start;
  EXPECT_LT(StoreBytes(d), 10u << 20) << "jobs.db and its log: the spec once, not 1,000 times";
  const long rss_kib = StatusKib(d.pid(), "VmRSS");
  EXPECT_LT(rss_kib - rss_before_kib, 64 << 10) << "the daemon grew by " << (rss_kib - rss_before_kib) << " KiB";
  EXPECT_LT(took, 10) << "seconds to take the array";
  // Every task still has the whole environment.
  const std::int64_t last = reply["ids"].back();
  json shown = d.Call({{"op", "show"}, {"id", fmt::format("{}_999", reply["array_job_id"].get<std::int64_t>())}});
  ASSERT_EQ(shown.value("ok", false), true) << shown.dump().substr(0, 300);
  EXPECT_EQ(shown["job"]["id"], last);
  EXPECT_EQ(shown["job"]["spec"]["env"], request["spec"]["env"]);
  // And after a restart, read back from the store, shared again.
  d.Kill9();
  ASSERT_TRUE(d.Start());
  EXPECT_LT(StatusKib(d.pid(), "VmRSS"), rss_before_kib + (64 << 10)) << "KiB after loading the 1,000 tasks";
  shown = d.Call({{"op", "show"}, {"id", std::to_string(last)}});
  EXPECT_EQ(shown["job"]["spec"]["env"], request["spec"]["env"]);
  EXPECT_EQ(d.Queue().size(), 1000u);
}

}  // namespace
}  // namespace gpulane::test
