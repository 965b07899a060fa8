// `gpulane status` through the real binary, the real dlopen path and the fake NVML.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

std::string Host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::uint64_t StatusU64(const json& v) { return v.get<std::uint64_t>(); }

TEST(Status, JsonMatchesTheRecordedH200s) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["driver_version"], "580.159.04");
  EXPECT_EQ(doc["cuda_driver_version"], "13.0");
  ASSERT_EQ(doc["gpus"].size(), 2u);
  const json& g1 = doc["gpus"][1];
  EXPECT_EQ(g1["uuid"], "GPU-778ba935-0843-21da-7a3c-88969e2a9af7");
  EXPECT_EQ(g1["pci_bus_id"], "00000000:00:07.0");
  EXPECT_EQ(g1["memory_total_bytes"], 150754820096ULL);
  EXPECT_EQ(g1["memory_used_bytes"], 5158862848ULL);
  EXPECT_EQ(g1["utilization_gpu_pct"], 100);
  EXPECT_EQ(g1["power_draw_mw"], 659938);
  EXPECT_EQ(g1["temperature_c"], 59);
  ASSERT_EQ(g1["processes"].size(), 1u);
  EXPECT_EQ(g1["processes"][0]["used_memory_bytes"], 4504682496ULL);
  EXPECT_FALSE(g1["processes"][0].contains("user")) << "a pid /proc cannot see has no made-up user";
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// A new user's finding: the set-up's recorded H200s showed their process as `?:4194303(4296M)`, with
// nothing saying what `?` was. A pid /proc does not show is said so, as pick and run word it.
TEST(Status, APidNotVisibleHereIsSaidSoNotAQuestionMark) {
  const std::uint32_t hidden = UnusedPid();
  FakeMachine machine(RecordedH200x2(hidden));
  RunResult r = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(Contains(lines[2], fmt::format("| pid {} (not visible here, 4296M)", hidden))) << lines[2];
  EXPECT_FALSE(Contains(r.out, "?:")) << r.out;
  // A new user's finding: a GPU with no process ended its line in "| " (a stray space).
  EXPECT_EQ(lines[1].back(), '|') << "[" << lines[1] << "]";
  EXPECT_EQ(lines[2].back(), ')') << "[" << lines[2] << "]";
}

TEST(Status, TextIsAHeaderAndOneLinePerGpuWithUserCommandAndMemory) {
  Child own = StartProcess({"/bin/sleep", "60"});
  ForeignProcess foreign;
  if (!foreign.foreign()) GTEST_SKIP() << "pid 1 is this user's own: no other user's process to show";
  json state = RecordedH200x2(own.pid());  // the recorded process on GPU 1 is now ours
  AddProcess(state["devices"][0], foreign.pid(), 1ULL << 30);
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(Contains(lines[0], Host())) << lines[0];
  EXPECT_TRUE(Contains(lines[0], "driver " + state["driver"].get<std::string>())) << lines[0];
  for (unsigned i = 0; i < 2; ++i) {
    const json& dev = state["devices"][i];
    const std::string& line = lines[1 + i];
    EXPECT_EQ(line.rfind(fmt::format("[{}]", i), 0), 0u) << line;
    EXPECT_TRUE(Contains(line, dev["name"].get<std::string>())) << line;
    EXPECT_TRUE(Contains(line, fmt::format("{} / {} MiB", StatusU64(dev["memory"]["used"]) >> 20,
                                           StatusU64(dev["memory"]["total"]) >> 20)))
        << line;
    EXPECT_TRUE(Contains(line, fmt::format("{}°C", dev["temp_c"].get<int>()))) << line;
  }
  EXPECT_TRUE(Contains(lines[1], fmt::format("{}:{}/{}(1024M)", foreign.user(), foreign.command(), foreign.pid())))
      << lines[1];
  const std::uint64_t own_mib = StatusU64(state["devices"][1]["processes"][0]["used_memory"]) >> 20;
  EXPECT_TRUE(Contains(lines[2], fmt::format("{}:sleep/{}({}M)", UserName(getuid()), own.pid(), own_mib))) << lines[2];
  EXPECT_FALSE(Contains(lines[1], std::to_string(own.pid()))) << lines[1];
  EXPECT_FALSE(Contains(r.out, "\x1b[")) << "NO_COLOR is set";
}

TEST(Status, JsonHasEveryFieldWithItsUnitInItsName) {
  Child own = StartProcess({"/bin/sleep", "60"});
  ForeignProcess foreign;
  if (!foreign.foreign()) GTEST_SKIP() << "pid 1 is this user's own: no other user's process to show";
  json state = RecordedH200x2(own.pid());
  AddProcess(state["devices"][0], foreign.pid(), 1ULL << 30);
  FakeMachine machine(state);
  const std::time_t before = std::time(nullptr);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["hostname"], Host());
  std::tm tm{};
  ASSERT_TRUE(strptime(doc["timestamp"].get<std::string>().c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) << doc["timestamp"];
  const std::time_t stamped = timegm(&tm);
  EXPECT_GE(stamped, before);
  EXPECT_LE(stamped, std::time(nullptr));
  EXPECT_EQ(doc["nvml_order_matches_pci_order"], true);
  EXPECT_EQ(doc["driver_version"], state["driver"]);
  EXPECT_EQ(doc["nvml_version"], state["nvml"]);
  EXPECT_FALSE(doc.contains("cuda_visible_devices")) << "unset in the environment";
  ASSERT_EQ(doc["gpus"].size(), 2u);
  for (unsigned i = 0; i < 2; ++i) {
    const json& g = doc["gpus"][i];
    const json& dev = state["devices"][i];
    SCOPED_TRACE(i);
    EXPECT_EQ(g["index"], i);
    EXPECT_EQ(g["nvml_index"], i);
    EXPECT_EQ(g["minor_number"], dev["minor"]);
    EXPECT_EQ(g["uuid"], dev["uuid"]);
    EXPECT_EQ(g["pci_bus_id"], dev["pci_bus_id"]);
    EXPECT_EQ(g["name"], dev["name"]);
    EXPECT_EQ(g["state"], "ok");
    EXPECT_FALSE(g.contains("error"));
    EXPECT_EQ(g["allowed"], true);
    EXPECT_EQ(g["memory_total_bytes"], dev["memory"]["total"]);
    EXPECT_EQ(g["memory_used_bytes"], dev["memory"]["used"]);
    EXPECT_EQ(g["memory_free_bytes"], dev["memory"]["free"]);
    EXPECT_EQ(g["utilization_gpu_pct"], dev["util"]["gpu"]);
    EXPECT_EQ(g["utilization_memory_pct"], dev["util"]["memory"]);
    EXPECT_EQ(g["temperature_c"], dev["temp_c"]);
    EXPECT_EQ(g["power_draw_mw"], dev["power_mw"]);
    EXPECT_EQ(g["power_limit_mw"], dev["power_limit_mw"]);
    EXPECT_EQ(g["performance_state"], fmt::format("P{}", dev["pstate"].get<int>()));
    EXPECT_EQ(g["compute_mode"], "default");
    EXPECT_EQ(g["persistence_mode"], true);
    EXPECT_EQ(g["mig_enabled"], false);
    EXPECT_FALSE(g.contains("mig_devices"));
    EXPECT_TRUE(g["nvlink_peers"].is_array());
    ASSERT_EQ(g["processes"].size(), dev["processes"].size());
    for (const auto& key : {"fan", "fan_pct", "clock_sm"}) EXPECT_FALSE(g.contains(key)) << key;
  }
  const json& theirs = doc["gpus"][0]["processes"][0];
  EXPECT_EQ(theirs["pid"], foreign.pid());
  EXPECT_EQ(theirs["used_memory_bytes"], 1ULL << 30);
  EXPECT_EQ(theirs["uid"], foreign.uid());
  EXPECT_EQ(theirs["user"], foreign.user());
  EXPECT_EQ(theirs["command"], foreign.command());
  const json& mine = doc["gpus"][1]["processes"][0];
  EXPECT_EQ(mine["pid"], own.pid());
  EXPECT_EQ(mine["used_memory_bytes"], state["devices"][1]["processes"][0]["used_memory"]);
  EXPECT_EQ(mine["uid"], getuid());
  EXPECT_EQ(mine["user"], UserName(getuid()));
  EXPECT_EQ(mine["command"], "sleep");
  EXPECT_EQ(mine["cmdline"], "/bin/sleep 60");
  EXPECT_FALSE(mine.contains("mig_uuid"));
}

TEST(Status, GpusOutsideCudaVisibleDevicesAreShownAsNotAllowed) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  Env env = machine.env();
  env["CUDA_VISIBLE_DEVICES"] = "1";
  RunResult r = RunGpulane({"status", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["cuda_visible_devices"], "1");
  EXPECT_EQ(doc["gpus"][0]["allowed"], false);
  EXPECT_EQ(doc["gpus"][1]["allowed"], true);
  r = RunGpulane({"status"}, env);
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(Contains(lines[1], "not in CUDA_VISIBLE_DEVICES")) << lines[1];
  EXPECT_FALSE(Contains(lines[2], "not in CUDA_VISIBLE_DEVICES")) << lines[2];
}

TEST(Status, NvmlOrderThatDiffersFromPciOrderIsSaidAndGpusAreInPciOrder) {
  json state = MixedModels();
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["nvml_order_matches_pci_order"], false);
  const json& gpus = doc["gpus"];
  ASSERT_EQ(gpus.size(), state["devices"].size());
  std::vector<bool> seen(gpus.size());
  for (unsigned i = 0; i < gpus.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(gpus[i]["index"], i);
    if (i > 0) {
      EXPECT_LT(gpus[i - 1]["pci_bus_id"].get<std::string>(), gpus[i]["pci_bus_id"].get<std::string>());
    }
    const unsigned nvml = gpus[i]["nvml_index"].get<unsigned>();
    ASSERT_LT(nvml, seen.size());
    seen[nvml] = true;
    const json& dev = state["devices"][nvml];  // NVML index = position in the state's array
    EXPECT_EQ(gpus[i]["uuid"], dev["uuid"]);
    EXPECT_EQ(gpus[i]["pci_bus_id"], dev["pci_bus_id"]);
    EXPECT_EQ(gpus[i]["minor_number"], dev["minor"]);
    EXPECT_EQ(gpus[i]["name"], dev["name"]);
    EXPECT_EQ(gpus[i]["memory_total_bytes"], dev["memory"]["total"]);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(seen.size()));

  r = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 1 + gpus.size() + 1) << r.out;
  for (unsigned i = 0; i < gpus.size(); ++i)
    EXPECT_EQ(lines[1 + i].rfind(fmt::format("[{}] nvml:{}", i, gpus[i]["nvml_index"].get<unsigned>()), 0), 0u)
        << lines[1 + i];
  EXPECT_EQ(lines.back().rfind("note: NVML", 0), 0u) << lines.back();
}

TEST(Status, MatchingOrderNeedsNoNote) {
  FakeMachine machine(EightGpus());
  RunResult r = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Contains(r.out, "note:")) << r.out;
  EXPECT_FALSE(Contains(r.out, "nvml:")) << r.out;
  EXPECT_EQ(Lines(r.out).size(), 9u) << r.out;
}

TEST(Status, ProcessesFlagShowsWholeCommandLines) {
  Child own = StartProcess({"/bin/sleep", "59.5"});
  const std::uint32_t hidden = UnusedPid();
  json state = RecordedH200x2(own.pid());
  AddProcess(state["devices"][0], hidden, 256ULL << 20);
  FakeMachine machine(state);
  RunResult plain = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(Contains(plain.out, "/bin/sleep 59.5")) << plain.out;
  for (const char* flag : {"-p", "--processes"}) {
    RunResult r = RunGpulane({"status", flag}, machine.env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto lines = Lines(r.out);
    ASSERT_EQ(lines.size(), 5u) << r.out;  // header, GPU 0, its process, GPU 1, its process
    EXPECT_TRUE(Contains(lines[2], std::to_string(hidden))) << lines[2];
    EXPECT_TRUE(Contains(lines[2], "256 MiB")) << lines[2];
    EXPECT_TRUE(Contains(lines[2], "not visible")) << lines[2];
    EXPECT_TRUE(Contains(lines[4], std::to_string(own.pid()))) << lines[4];
    EXPECT_TRUE(Contains(lines[4], UserName(getuid()))) << lines[4];
    EXPECT_TRUE(Contains(lines[4], "/bin/sleep 59.5")) << lines[4];
    EXPECT_TRUE(Contains(lines[4],
                         fmt::format("{} MiB", StatusU64(state["devices"][1]["processes"][0]["used_memory"]) >> 20)))
        << lines[4];
  }
}

TEST(Status, MigGpuShowsItsMigDevicesAndWhereItsProcessesRun) {
  Child own = StartProcess({"/bin/sleep", "60"});
  json state = WithMigGpu(own.pid());
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  const json* mig = nullptr;
  for (const json& g : doc["gpus"])
    if (g["uuid"] == MigParentUuid()) mig = &g;
  ASSERT_NE(mig, nullptr) << doc.dump();
  EXPECT_EQ((*mig)["mig_enabled"], true);
  EXPECT_FALSE(mig->contains("utilization_gpu_pct"));
  const json& migs = DeviceByUuid(state, MigParentUuid())["mig_devices"];
  ASSERT_EQ((*mig)["mig_devices"].size(), migs.size());
  for (unsigned i = 0; i < migs.size(); ++i) {
    const json& m = (*mig)["mig_devices"][i];
    EXPECT_EQ(m["uuid"], migs[i]["uuid"]);
    EXPECT_EQ(m["gpu_instance_id"], migs[i]["gi"]);
    EXPECT_EQ(m["compute_instance_id"], migs[i]["ci"]);
    EXPECT_EQ(m["memory_total_bytes"], migs[i]["memory"]["total"]);
    EXPECT_EQ(m["memory_used_bytes"], migs[i]["memory"]["used"]);
    EXPECT_EQ(m["profile"], "3g.71gb") << "from the MIG device's name";
  }
  ASSERT_EQ((*mig)["processes"].size(), 1u);
  EXPECT_EQ((*mig)["processes"][0]["pid"], own.pid());
  EXPECT_EQ((*mig)["processes"][0]["mig_uuid"], MigDeviceUuids()[0]);
  EXPECT_EQ(doc["gpus"][0]["mig_enabled"], false);

  r = RunGpulane({"status"}, machine.env());
  EXPECT_TRUE(Contains(r.out, fmt::format("MIG({})", migs.size()))) << r.out;
  // A line per MIG device under its GPU: profile, UUID, and the process on it.
  EXPECT_TRUE(Contains(r.out, fmt::format("    MIG 3g.71gb   {} |", MigDeviceUuids()[0]))) << r.out;
  EXPECT_TRUE(Contains(r.out, fmt::format("    MIG 3g.71gb   {} |", MigDeviceUuids()[1]))) << r.out;
}

TEST(Status, NvLinkPeersAreListed) {
  json state = EightGpus();
  FakeMachine machine(state);
  RunResult r = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  for (unsigned i = 0; i < 8; ++i) {
    std::vector<std::string> expected, got;
    for (auto [a, b] : EightGpuLinks()) {
      if (a == i) expected.push_back(doc["gpus"][b]["pci_bus_id"]);
      if (b == i) expected.push_back(doc["gpus"][a]["pci_bus_id"]);
    }
    for (const json& peer : doc["gpus"][i]["nvlink_peers"]) {
      got.push_back(peer["pci_bus_id"]);
      EXPECT_EQ(peer["links"], 4);
    }
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "GPU " << i;
  }
}

TEST(Status, StdoutHoldsOnlyResultsAndWarningsGoToStderr) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  Env env = machine.env();
  env["CUDA_VISIBLE_DEVICES"] = "1,bogus,0";
  RunResult r = RunGpulane({"status", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);  // throws if anything else is on stdout
  EXPECT_EQ(doc["gpus"][0]["allowed"], false) << "entries after 'bogus' do not count";
  EXPECT_EQ(doc["gpus"][1]["allowed"], true);
  EXPECT_TRUE(Contains(r.err, "warning")) << r.err;
  EXPECT_TRUE(Contains(r.err, "bogus")) << r.err;
  r = RunGpulane({"status"}, env);
  EXPECT_FALSE(Contains(r.out, "bogus")) << r.out;
  EXPECT_TRUE(Contains(r.err, "bogus")) << r.err;
}

}  // namespace
}  // namespace gpulane::test
