// `gpulane simulate` through the real binary on the project's own small trace
// (tests/fixtures/simulate/small.csv): the table, --json, --per-job-csv, and bad options.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/harness.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

std::string SmallTrace() { return FixturesDir() + "/simulate/small.csv"; }

TEST(SimulateCommand, ComparesTheFourPoliciesAsJson) {
  const RunResult r = RunGpulane({"simulate", SmallTrace(), "--gpus", "4", "--json"}, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["trace"]["jobs"], 200);
  ASSERT_EQ(out["policies"].size(), 4u);
  std::vector<std::string> names;
  for (const json& p : out["policies"]) {
    names.push_back(p["policy"]);
    EXPECT_EQ(p["jobs"], 200);
    EXPECT_GT(p["utilisation"].get<double>(), 0.5);
    EXPECT_LE(p["utilisation"].get<double>(), 1.0);
    EXPECT_LE(p["wait_median_s"].get<double>(), p["wait_p95_s"].get<double>());
    EXPECT_LE(p["wait_p95_s"].get<double>(), p["wait_p99_s"].get<double>());
    EXPECT_GE(p["bounded_slowdown_mean"].get<double>(), 1.0);
    EXPECT_GT(p["jain_slowdown"].get<double>(), 0.0);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fifo", "firstfit", "easy", "default"}));
  // Strict FCFS waits longest on this trace; skipping ahead or backfilling helps.
  EXPECT_GT(out["policies"][0]["wait_mean_s"].get<double>(), out["policies"][3]["wait_mean_s"].get<double>());
}

TEST(SimulateCommand, PrintsATableAndWritesEveryJobPerPolicy) {
  const std::filesystem::path csv = std::filesystem::path(::testing::TempDir()) / "per-job.csv";
  const RunResult r = RunGpulane({"simulate", SmallTrace(), "--gpus", "4", "--policy", "easy,default", "--load", "0.7",
                                  "--time-limit-from", "factor:2", "--users", "2", "--per-job-csv", csv.string()},
                                 {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("offered load 0.700"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\neasy "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ndefault "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nfifo "), std::string::npos) << r.out;
  std::ifstream in(csv);
  std::string line;
  std::size_t lines = 0;
  std::getline(in, line);
  EXPECT_EQ(line, "policy,job,user,gpus,mem_bytes,submit_s,time_limit_s,duration_s,start_s,end_s,wait_s,timed_out,placement");
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 400u) << "200 jobs x 2 policies";
}

TEST(SimulateCommand, ComparesPlacementsInOneRun) {
  const RunResult r = RunGpulane({"simulate", SmallTrace(), "--gpus", "4", "--policy", "default", "--placement",
                                  "mostfree,bestfit", "--json"},
                                 {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out["policies"].size(), 2u);
  EXPECT_EQ(out["policies"][0]["placement"], "mostfree");
  EXPECT_EQ(out["policies"][1]["placement"], "bestfit");
  for (const auto& p : out["policies"]) {
    EXPECT_EQ(p["policy"], "default");
    EXPECT_GE(p["shared_gpus_mean"].get<double>(), 0.0);
    EXPECT_LE(p["shared_gpus_mean"].get<double>() + p["idle_gpus_mean"].get<double>(), 4.0 + 1e-9);
    EXPECT_GE(p["fragmented_s"].get<double>(), 0.0);
    EXPECT_LE(p["whole_jobs"].get<unsigned>(), 200u);
  }
  const RunResult plain = RunGpulane({"simulate", SmallTrace(), "--gpus", "4", "--policy", "default", "--json"}, {});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["policies"][0]["placement"], "bestfit") << "the default";
}

TEST(SimulateCommand, RefusesBadOptionsWithExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"simulate", SmallTrace(), "--policy", "sjf"},
        {"simulate", SmallTrace(), "--format", "slurm"},
        {"simulate", SmallTrace(), "--time-limit-from", "factor:-1"},
        {"simulate", SmallTrace(), "--load", "0"},
        {"simulate", SmallTrace(), "--placement", "worstfit"},
        {"simulate", "/nonexistent/trace.csv"}}) {
    const RunResult r = RunGpulane(args, {});
    EXPECT_NE(r.exit_code, 0) << args[2];
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("gpulane: error: "), std::string::npos) << r.err;
  }
  EXPECT_EQ(RunGpulane({"simulate", SmallTrace(), "--policy", "sjf"}, {}).exit_code, 2);
  // The bounds a user can act on, not CLI11's "0.000000 to 1.797...e308".
  const RunResult zero = RunGpulane({"simulate", SmallTrace(), "--max-waiting", "0"}, {});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--max-waiting: Value 0 not in range 1 to 1000000"), std::string::npos) << zero.err;
  EXPECT_EQ(zero.err.find("e+308"), std::string::npos) << zero.err;
  EXPECT_EQ(zero.err.find("179769"), std::string::npos) << zero.err;
}

}  // namespace
}  // namespace gpulane::test
