// `gpulane status` shows the GPUs the line holds for a waiting job as `pick` and `run` decide them
// (a new user's finding: status showed such a GPU free while pick refused it). Through the real
// binary and the fake NVML, with `gpulane run` processes holding and waiting.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <fstream>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

std::string ThisUser() {
  const passwd* pw = getpwuid(getuid());
  return pw ? pw->pw_name : std::to_string(getuid());
}

// The line of GPU `index` in the text view ("[1] NVIDIA ...").
std::string GpuLineOf(const std::string& text, unsigned index) {
  const std::string head = "[" + std::to_string(index) + "]";
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.rfind(head, 0) == 0) return line;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// GPU 0 is leased by a `run` without a time limit; a `run -g 2` waits for it, and the line holds
// free GPU 1 for that run (its start is unknown: sched.max_reserve_idle, 10 min by default). pick
// refuses GPU 1, and status says whom it is held for, in the table and in --json; once the waiting
// run has started and ended, nothing is held.
TEST(StatusReserved, AFreeGpuHeldForAWaitingJobIsShownReservedForIt) {
  FakeMachine machine(IdleGpus(2));
  Env env = machine.env();
  const std::string gate = (machine.dir() / "gate").string();
  Child holder({GpulaneBinary(), "run", "-q", "--gpus", "0", "--", "sh", "-c",
                "while [ ! -e " + gate + " ]; do sleep 0.02; done"},
               env);
  ASSERT_TRUE(Eventually([&] { return RunGpulane({"pick", "--gpus", "0"}, env).exit_code == 5; }))
      << "GPU 0 is leased by the first run";
  RunResult before = RunGpulane({"status", "--json"}, env);
  ASSERT_EQ(before.exit_code, 0) << before.err;
  for (const json& g : json::parse(before.out)["gpus"])
    EXPECT_FALSE(g.contains("reserved_for")) << "nobody waits yet: " << g.dump();

  Child head({GpulaneBinary(), "run", "-q", "-g", "2", "--", "true"}, env);
  RunResult pick;
  ASSERT_TRUE(Eventually([&] {
    pick = RunGpulane({"pick", "-g", "1"}, env);
    return pick.exit_code == 5 && Contains(pick.err, "GPU1: held for an earlier request");
  })) << "once the -g 2 run waits, pick refuses GPU 1: " << pick.err;
  const std::string waiter = "job r" + std::to_string(head.pid()) + " (" + ThisUser() + ")";

  RunResult text = RunGpulane({"status"}, env);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Contains(GpuLineOf(text.out, 1), "(reserved for " + waiter + ")")) << text.out;
  RunResult doc = RunGpulane({"status", "--json"}, env);
  ASSERT_EQ(doc.exit_code, 0) << doc.err;
  const json gpus = json::parse(doc.out)["gpus"];
  ASSERT_EQ(gpus.size(), 2u) << doc.out;
  EXPECT_EQ(gpus[1].value("reserved_for", ""), waiter) << gpus[1].dump();
  EXPECT_FALSE(gpus[1].contains("held_by")) << "GPU 1 is free: no lease holds it";

  std::ofstream(gate).put('x');
  ASSERT_TRUE(holder.Wait(30).has_value());
  auto ended = head.Wait(30);
  ASSERT_TRUE(ended) << "the -g 2 run starts once GPU 0 is free";
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
  RunResult after = RunGpulane({"status", "--json"}, env);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  for (const json& g : json::parse(after.out)["gpus"])
    EXPECT_FALSE(g.contains("reserved_for")) << "nobody waits any more: " << g.dump();
}

}  // namespace
}  // namespace gpulane::test
