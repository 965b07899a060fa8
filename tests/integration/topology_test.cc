// NVLink topology as gpulane reads it, including machines where a link's remote end is not the other
// GPU (an NVSwitch, or the placeholder bus ID FFFFFFFF:FF:FF.0 seen on a 2 x H200 VM whose GPUs
// nvidia-smi shows as NV18): the P2P status decides which GPUs are linked.
#include <gtest/gtest.h>

#include "support/harness.h"
#include "support/scenarios.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

TEST(Topology, GpusLinkedThroughAPlaceholderRemoteAreStillPeers) {
  json state = RecordedH200x2(UnusedPid());
  for (auto& d : state["devices"]) {
    d["processes"] = json::array();
    d["nvlinks"] = {{"FFFFFFFF:FF:FF.0", 18}};  // as the real 2 x H200 VM reported
  }
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["gpus"][0]["nvlink_peers"].size(), 1u) << doc["gpus"][0]["nvlink_peers"];
  EXPECT_EQ(doc["gpus"][0]["nvlink_peers"][0]["pci_bus_id"], "00000000:00:07.0");
  EXPECT_EQ(doc["gpus"][0]["nvlink_peers"][0]["links"], 18);
  EXPECT_EQ(doc["gpus"][1]["nvlink_peers"][0]["pci_bus_id"], "00000000:00:06.0");
}

TEST(Topology, EightGpusBehindOneSwitchAreAllLinked) {
  json state = EightGpus();
  for (auto& d : state["devices"]) d["nvlinks"] = {{"00000000:FF:00.0", 18}};  // every GPU to one switch
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);  // not in the loop's head: the parsed temporary would die before the loop
  ASSERT_EQ(doc["gpus"].size(), 8u);
  for (const auto& gpu : doc["gpus"]) EXPECT_EQ(gpu["nvlink_peers"].size(), 7u) << gpu["index"];
}

TEST(Topology, UnlinkedGpusHaveNoPeers) {
  json state = EightGpus();
  for (auto& d : state["devices"]) d.erase("nvlinks");
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["gpus"].size(), 8u);
  for (const auto& gpu : doc["gpus"]) EXPECT_TRUE(gpu["nvlink_peers"].empty()) << gpu["index"];
}

}  // namespace
}  // namespace gpulane::test
