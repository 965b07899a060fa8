// `gpulane status` on older drivers: without the _v3 process call (535.43-535.98) and before 510
// (no _v2 process call, no MemoryInfo_v2, no PciInfo_v3), processes and memory are still shown.
#include <unistd.h>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

class OlderDriver : public ::testing::TestWithParam<std::string> {};

TEST_P(OlderDriver, StillGivesProcessesAndMemory) {
  Child own = StartProcess({"/bin/sleep", "60"});
  json state = RecordedH200x2(own.pid());
  const std::uint32_t hidden = UnusedPid();
  AddProcess(state["devices"][0], hidden, 3ULL << 30);
  FakeMachine machine(state, GetParam());
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["gpus"].size(), 2u);
  for (unsigned i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const json& g = doc["gpus"][i];
    const json& dev = state["devices"][i];
    EXPECT_EQ(g["state"], "ok");
    EXPECT_EQ(g["uuid"], dev["uuid"]);
    EXPECT_EQ(g["pci_bus_id"], dev["pci_bus_id"]) << "8-digit domain whatever form the driver gives";
    EXPECT_EQ(g["memory_total_bytes"], dev["memory"]["total"]);
    EXPECT_EQ(g["memory_used_bytes"], dev["memory"]["used"]);
    EXPECT_EQ(g["memory_free_bytes"], dev["memory"]["free"]);
    ASSERT_EQ(g["processes"].size(), 1u);
    EXPECT_EQ(g["processes"][0]["pid"], dev["processes"][0]["pid"]);
    EXPECT_EQ(g["processes"][0]["used_memory_bytes"], dev["processes"][0]["used_memory"]);
  }
  EXPECT_EQ(doc["gpus"][1]["processes"][0]["user"], UserName(getuid()));
  EXPECT_EQ(doc["gpus"][1]["processes"][0]["cmdline"], "/bin/sleep 60");
  // Only MemoryInfo_v2 reports the driver's reservation; without it the field is absent, not 0.
  EXPECT_EQ(doc["gpus"][0].contains("memory_reserved_bytes"), GetParam() != "legacy");

  r = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(Contains(lines[2], fmt::format("sleep/{}(", own.pid()))) << lines[2];
}

INSTANTIATE_TEST_SUITE_P(Status, OlderDriver, ::testing::Values("current", "no_v3", "legacy"));

}  // namespace
}  // namespace gpulane::test
