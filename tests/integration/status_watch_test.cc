// `gpulane status --watch`: redraws with what changed until Ctrl-C, then exits 0.
#include <signal.h>

#include <gtest/gtest.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

bool HasProcess(const json& gpu, std::uint32_t pid) {
  if (!gpu.contains("processes")) return false;
  for (const json& p : gpu["processes"])
    if (p["pid"] == pid) return true;
  return false;
}

TEST(StatusWatch, JsonDocumentsFollowTheMachineUntilInterrupted) {
  Child own = StartProcess({"/bin/sleep", "60"});
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  json& gpu0 = machine.state()["devices"][0];
  const std::uint64_t used_before = gpu0["memory"]["used"].get<std::uint64_t>();
  Child watch({GpulaneBinary(), "status", "--watch", "0.2", "--json"}, machine.env());

  ASSERT_TRUE(Eventually([&] { return !JsonLines(watch.OutSoFar()).empty(); })) << watch.ErrSoFar();
  json first = JsonLines(watch.OutSoFar()).front();
  EXPECT_EQ(first["gpus"][0]["memory_used_bytes"], used_before);
  EXPECT_FALSE(HasProcess(first["gpus"][0], own.pid()));

  const std::uint64_t used_after = 100ULL << 30;
  SetUsedMemory(gpu0, used_after);
  AddProcess(gpu0, own.pid(), used_after);
  machine.Save();
  EXPECT_TRUE(Eventually([&] {
    auto docs = JsonLines(watch.OutSoFar());
    const json& g = docs.back()["gpus"][0];
    return g["memory_used_bytes"] == used_after && HasProcess(g, own.pid());
  })) << watch.OutSoFar();

  watch.Kill(SIGINT);
  auto r = watch.Wait(10);
  ASSERT_TRUE(r) << "still running after SIGINT";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE(r->err.empty()) << r->err;
  auto docs = JsonLines(r->out);  // every line is one whole document: nothing else on stdout
  EXPECT_GE(docs.size(), 2u);
  for (const json& d : docs) EXPECT_EQ(d["schema_version"], 1);
}

TEST(StatusWatch, TextFramesFollowTheMachineAndSigtermEndsItToo) {
  FakeMachine machine(EightGpus());
  Child watch({GpulaneBinary(), "status", "--watch", "0.2"}, machine.env());
  ASSERT_TRUE(Eventually([&] { return Contains(watch.OutSoFar(), "[7]"); })) << watch.ErrSoFar();
  SetUsedMemory(machine.state()["devices"][3], 77777ULL << 20);
  machine.Save();
  EXPECT_TRUE(Eventually([&] { return Contains(watch.OutSoFar(), "77777 / "); })) << watch.OutSoFar();
  watch.Kill(SIGTERM);
  auto r = watch.Wait(10);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_FALSE(Contains(r->out, "\x1b[")) << "not a terminal: no redraw codes";
}

TEST(StatusWatch, AnIntervalThatIsNotANumberIsAUsageError) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  for (const char* bad : {"soon", "0.01"}) {
    RunResult r = RunGpulane({"status", "--watch", bad}, machine.env(), 5);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_TRUE(Contains(r.err, bad)) << r.err;
  }
}

}  // namespace
}  // namespace gpulane::test
