// Device isolation (issue 26): inside a job only its GPUs exist. Each test builds a /dev-like tree
// and a /proc/driver-like tree of its own (GPULANE_DEV_ROOT, GPULANE_PROC_DRIVER_ROOT: the device
// nodes are regular files holding their own name, so a masked one reads as /dev/null, empty) and
// looks at them from inside a job the real binary starts, and from outside. Needs root (CI and the
// dev machine are): the spawner makes a mount namespace.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include "integration/run_support.h"
#include "support/daemon_fixture.h"

namespace gpulane::test {
namespace {

// The driver's files for the GPUs of a fake NVML state: /dev/nvidia<minor> for each GPU (by its
// "minor"), nvidiactl, nvidia-uvm, nvidia-caps/nvidia-cap<M>, and /proc/driver/nvidia with params,
// version, gpus/<bus id> (4-digit domain, lower case, as the driver names them) and
// nvidia-caps/mig-minors.
class DriverTree {
 public:
  DriverTree(const fs::path& root, const json& state) : dev_(root / "dev"), proc_(root / "proc_driver") {
    fs::create_directories(dev_ / "nvidia-caps");
    fs::create_directories(proc_ / "nvidia" / "gpus");
    fs::create_directories(proc_ / "nvidia" / "capabilities");
    fs::create_directories(proc_ / "nvidia-caps");
    for (const std::string name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) Node(name);
    for (const auto& gpu : state["devices"]) {
      if (!gpu.contains("minor")) continue;
      Node(fmt::format("nvidia{}", gpu["minor"].get<unsigned>()));
      std::string bus = gpu["pci_bus_id"].get<std::string>().substr(4);
      for (char& c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      fs::create_directories(proc_ / "nvidia" / "gpus" / bus);
      std::ofstream(proc_ / "nvidia" / "gpus" / bus / "information") << "Device Minor: " << gpu["minor"] << "\n";
    }
    std::ofstream(proc_ / "nvidia" / "params") << "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n";
    std::ofstream(proc_ / "nvidia" / "version") << "NVRM version: fake\n";
    std::ofstream(proc_ / "nvidia" / "capabilities" / "mig") << "caps\n";
  }
  // MIG capabilities: "gpu<minor>/gi<g>/access <M>" and ".../ci<c>/access <M>" lines, with nodes.
  void AddMigCaps(const std::vector<std::pair<std::string, unsigned>>& caps) {
    std::ofstream lines(proc_ / "nvidia-caps" / "mig-minors", std::ios::app);
    for (const auto& [key, minor] : caps) {
      lines << key << " " << minor << "\n";
      std::ofstream(dev_ / "nvidia-caps" / fmt::format("nvidia-cap{}", minor)) << "cap" << minor;
    }
  }
  Env env() const { return {{"GPULANE_DEV_ROOT", dev_.string()}, {"GPULANE_PROC_DRIVER_ROOT", proc_.string()}}; }
  const fs::path& dev() const { return dev_; }
  const fs::path& proc() const { return proc_; }

 private:
  void Node(const std::string& name) { std::ofstream(dev_ / name) << name; }
  fs::path dev_, proc_;
};

// What a shell sees of the tree, "dev:<name>=<contents>" for every node (nvidia-caps/ too),
// "gpus:<entry>" for each /proc/driver/nvidia/gpus entry, "proc:<entry>" for /proc/driver/nvidia's,
// "params:<line>" for its params.
const char* kLook =
    R"sh(cd "$0" && for f in nvidia* nvidia-caps/*; do [ -e "$f" ] && [ ! -d "$f" ] && printf 'dev:%s=%s\n' "$f" "$(cat "$f")"; done; )sh"
    R"sh(for f in "$1"/nvidia/gpus/*; do [ -e "$f" ] && printf 'gpus:%s\n' "${f##*/}"; done; )sh"
    R"sh(for f in "$1"/nvidia/*; do printf 'proc:%s\n' "${f##*/}"; done; )sh"
    R"sh(sed 's/^/params:/' "$1"/nvidia/params; )sh";

std::vector<std::string> Look(const DriverTree& tree) { return {"sh", "-c", kLook, tree.dev().string(), tree.proc().string()}; }

// The lines of a Look, as a map "dev:nvidia3" -> "nvidia3" (value after '=', "" for the others).
std::map<std::string, std::string> Seen(const std::string& out) {
  std::map<std::string, std::string> seen;
  for (const std::string& line : Lines(out)) {
    const auto eq = line.find('=');
    seen[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
  }
  return seen;
}

// The tree read directly, outside any job, in Look's words.
std::map<std::string, std::string> SeenOutside(const DriverTree& tree) {
  std::map<std::string, std::string> seen;
  for (const fs::path& dir : {tree.dev(), tree.dev() / "nvidia-caps"})
    for (const auto& e : fs::directory_iterator(dir))
      if (!e.is_directory())
        seen["dev:" + fs::relative(e.path(), tree.dev()).string()] = ReadFile(e.path());
  for (const auto& e : fs::directory_iterator(tree.proc() / "nvidia" / "gpus")) seen["gpus:" + e.path().filename().string()] = "";
  for (const std::string& line : Lines(ReadFile(tree.proc() / "nvidia" / "params"))) seen["params:" + line] = "";
  return seen;
}

std::vector<std::string> RunArgs(std::vector<std::string> options, const std::vector<std::string>& command) {
  options.push_back("--");
  options.insert(options.end(), command.begin(), command.end());
  return options;
}

class DeviceIsolation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "device isolation needs root (CI and the dev machine run tests as root)";
  }
};

// MixedModels: PCI index 0 is the H200 on bus 01 with minor 3; the others have minors 0, 1, 2.
TEST_F(DeviceIsolation, AJobSeesOnlyItsOwnGpusNodeAndDriverEntry) {
  FakeMachine machine(MixedModels());
  DriverTree tree(machine.dir(), machine.state());
  const RunResult r = RunOn(machine, RunArgs({"--gpus", "0"}, Look(tree)), tree.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "a job that is isolated starts without a warning";
  auto seen = Seen(r.out);
  EXPECT_EQ(seen["dev:nvidia3"], "nvidia3") << r.out;  // its own GPU: minor 3, not index 0
  for (const char* other : {"dev:nvidia0", "dev:nvidia1", "dev:nvidia2"}) EXPECT_EQ(seen[other], "") << other << "\n" << r.out;
  for (const char* kept : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"})
    EXPECT_EQ(seen[fmt::format("dev:{}", kept)], kept) << r.out;
  EXPECT_TRUE(seen.count("gpus:0000:01:00.0")) << r.out;
  EXPECT_EQ(std::count_if(seen.begin(), seen.end(), [](const auto& kv) { return kv.first.rfind("gpus:", 0) == 0; }), 1) << r.out;
  EXPECT_TRUE(seen.count("params:ModifyDeviceFiles: 0")) << r.out;  // nvidia-modprobe recreates nothing
  EXPECT_TRUE(seen.count("params:DeviceFileUID: 0")) << r.out;
  for (const char* kept : {"proc:version", "proc:capabilities", "proc:params", "proc:gpus"}) EXPECT_TRUE(seen.count(kept)) << kept << r.out;

  // Outside, nothing changed: every node holds its name, every GPU's entry is there.
  auto outside = SeenOutside(tree);
  for (const char* node : {"nvidia0", "nvidia1", "nvidia2", "nvidia3"}) EXPECT_EQ(outside[fmt::format("dev:{}", node)], node);
  EXPECT_EQ(std::count_if(outside.begin(), outside.end(), [](const auto& kv) { return kv.first.rfind("gpus:", 0) == 0; }), 4);
  EXPECT_TRUE(outside.count("params:ModifyDeviceFiles: 1"));
}

// With the fake NVML seeing the device tree as the driver does (FAKE_NVML_DEV_ROOT), NVML inside the
// job counts only its GPU: `gpulane status --json` there lists exactly the job's UUID; a -g 0 job's
// lists none.
TEST_F(DeviceIsolation, NvmlInsideAJobCountsOnlyItsGpus) {
  FakeMachine machine(MixedModels());
  DriverTree tree(machine.dir(), machine.state());
  Env env = tree.env();
  env["FAKE_NVML_DEV_ROOT"] = tree.dev().string();
  env["GPULANE_DIRECT_NVML"] = "1";  // NVML read by each command itself
  const std::string status = "echo \"$GPULANE_GPU_UUIDS\"; \"$0\" status --json";
  RunResult r = RunOn(machine, {"--gpus", "2", "--", "sh", "-c", status, GpulaneBinary()}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string uuid = r.out.substr(0, r.out.find('\n'));
  json inside = json::parse(r.out.substr(r.out.find('\n') + 1));
  ASSERT_EQ(inside["gpus"].size(), 1u) << inside.dump();
  EXPECT_EQ(inside["gpus"][0]["uuid"], uuid);
  r = RunOn(machine, {"-g", "0", "--", GpulaneBinary(), "status", "--json"}, env);
  EXPECT_EQ(json::parse(r.out)["gpus"].size(), 0u) << r.out << r.err;
  r = RunGpulane({"status", "--json"}, RunEnv(machine, env));  // outside: all four
  EXPECT_EQ(json::parse(r.out)["gpus"].size(), 4u) << r.out << r.err;
}

TEST_F(DeviceIsolation, NothingChangesOutsideWhileTheJobRuns) {
  FakeMachine machine(MixedModels());
  DriverTree tree(machine.dir(), machine.state());
  const fs::path inside = machine.dir() / "inside", gate = machine.dir() / "gate";
  const std::string job = "{ " + std::string(kLook) + R"sh(} > "$2.tmp"; mv "$2.tmp" "$2"; while [ ! -e "$3" ]; do sleep 0.02; done)sh";
  Child run = StartRun(machine, {"--gpus", "1", "--", "sh", "-c", job, tree.dev().string(), tree.proc().string(),
                                 inside.string(), gate.string()},
                       tree.env());
  ASSERT_TRUE(Eventually([&] { return fs::exists(inside); }, 30)) << run.ErrSoFar();
  EXPECT_EQ(Seen(ReadFile(inside))["dev:nvidia0"], "nvidia0");  // PCI index 1: bus 41, minor 0
  EXPECT_EQ(Seen(ReadFile(inside))["dev:nvidia3"], "");
  // While it runs: every node reads as itself outside, and no mount of the job's shows here.
  auto outside = SeenOutside(tree);
  for (const char* node : {"nvidia0", "nvidia1", "nvidia2", "nvidia3"}) EXPECT_EQ(outside[fmt::format("dev:{}", node)], node);
  EXPECT_FALSE(Contains(ReadFile("/proc/self/mountinfo"), machine.dir().string())) << ReadFile("/proc/self/mountinfo");
  std::ofstream(gate) << "go";
  auto done = run.Wait(30);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->exit_code, 0) << done->err;
}

TEST_F(DeviceIsolation, AJobWithNoGpuSeesNone) {
  FakeMachine machine(MixedModels());
  DriverTree tree(machine.dir(), machine.state());
  const RunResult r = RunOn(machine, RunArgs({"-g", "0"}, Look(tree)), tree.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto seen = Seen(r.out);
  for (const char* node : {"dev:nvidia0", "dev:nvidia1", "dev:nvidia2", "dev:nvidia3"}) EXPECT_EQ(seen[node], "") << node << r.out;
  EXPECT_EQ(seen["dev:nvidiactl"], "nvidiactl");
  EXPECT_EQ(std::count_if(seen.begin(), seen.end(), [](const auto& kv) { return kv.first.rfind("gpus:", 0) == 0; }), 0) << r.out;
}

// WithMigGpu: the MIG-mode GPU is minor 2 (bus 08); `--mig` gets its second MIG device (GPU
// instance 2, compute instance 0), the first one running another process.
TEST_F(DeviceIsolation, AMigJobKeepsOnlyItsOwnInstancesCapabilities) {
  FakeMachine machine(WithMigGpu(UnusedPid()));
  DriverTree tree(machine.dir(), machine.state());
  tree.AddMigCaps({{"config", 1}, {"monitor", 2}, {"gpu0/gi1/access", 3}, {"gpu2/gi1/access", 21}, {"gpu2/gi1/ci0/access", 22},
                   {"gpu2/gi2/access", 23}, {"gpu2/gi2/ci0/access", 24}});
  const RunResult r = RunOn(machine, RunArgs({"--mig", "3g.71gb"}, Look(tree)), tree.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto seen = Seen(r.out);
  EXPECT_EQ(seen["dev:nvidia2"], "nvidia2") << r.out;
  EXPECT_EQ(seen["dev:nvidia0"], "") << r.out;
  EXPECT_EQ(seen["dev:nvidia-caps/nvidia-cap23"], "cap23") << r.out;
  EXPECT_EQ(seen["dev:nvidia-caps/nvidia-cap24"], "cap24") << r.out;
  for (const char* other : {"dev:nvidia-caps/nvidia-cap3", "dev:nvidia-caps/nvidia-cap21", "dev:nvidia-caps/nvidia-cap22"})
    EXPECT_EQ(seen[other], "") << other << "\n" << r.out;
  EXPECT_EQ(seen["dev:nvidia-caps/nvidia-cap1"], "cap1") << "config and monitor are left to their own permissions";
}

TEST_F(DeviceIsolation, OffLeavesEveryNodeVisible) {
  FakeMachine machine(MixedModels());
  DriverTree tree(machine.dir(), machine.state());
  std::ofstream(machine.dir() / "config.toml") << "[run]\nisolate = \"off\"\n";
  const RunResult r = RunOn(machine, RunArgs({"--gpus", "0"}, Look(tree)), tree.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto seen = Seen(r.out);
  for (const char* node : {"nvidia0", "nvidia1", "nvidia2", "nvidia3"}) EXPECT_EQ(seen[fmt::format("dev:{}", node)], node);
}

// A GPU whose minor number NVML does not report: its node cannot be told apart, so the job starts
// with a warning (every node visible), or with isolate_required not at all.
TEST_F(DeviceIsolation, UnknownMinorNumberWarnsOrFailsWhenRequired) {
  json state = MixedModels();
  for (auto& gpu : state["devices"]) gpu.erase("minor");
  FakeMachine machine(state);
  DriverTree tree(machine.dir(), MixedModels());
  const fs::path ran = machine.dir() / "ran";
  RunResult r = RunOn(machine, {"--gpus", "0", "--", "sh", "-c", "cat \"$0\"/nvidia0", tree.dev().string()}, tree.env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "nvidia0");
  EXPECT_TRUE(Contains(r.err, "gpulane: warning: the job runs without device isolation")) << r.err;
  EXPECT_TRUE(Contains(r.err, "NVML does not report the minor number of GPU0")) << r.err;

  std::ofstream(machine.dir() / "config.toml") << "[run]\nisolate_required = true\n";
  r = RunOn(machine, {"--gpus", "0", "--", "touch", ran.string()}, tree.env());
  EXPECT_EQ(r.exit_code, 126) << r.err;
  EXPECT_TRUE(Contains(r.err, "cannot isolate the job's GPUs: NVML does not report the minor number of GPU0")) << r.err;
  EXPECT_FALSE(fs::exists(ran)) << "a job that must be isolated and cannot be never starts";
}

// The daemon's queued jobs go through the same spawner: its supervisor isolates them; `show` says so.
TEST_F(DeviceIsolation, AQueuedJobIsIsolatedAndShowSaysSo) {
  char root_template[] = "/tmp/gpulane-isolation-XXXXXX";
  ASSERT_NE(mkdtemp(root_template), nullptr);
  const fs::path root = root_template;
  DriverTree tree(root, MixedModels());
  DaemonOptions options;
  options.state = MixedModels();
  options.daemon_env = tree.env();  // its supervisors inherit the daemon's environment
  {
    TestDaemon d(options);
    std::vector<std::string> args = {"--gpus", "0", "-o", "look.out", "--"};
    for (const auto& a : Look(tree)) args.push_back(a);
    const std::int64_t id = d.Submit(args);
    RunResult waited = d.Gpulane({"wait", std::to_string(id)});
    ASSERT_EQ(waited.exit_code, 0) << waited.err;
    auto seen = Seen(ReadFile(d.work() / "look.out"));
    EXPECT_EQ(seen["dev:nvidia3"], "nvidia3") << ReadFile(d.work() / "look.out");
    EXPECT_EQ(seen["dev:nvidia0"], "") << ReadFile(d.work() / "look.out");
    // What this job was given, recorded by its supervisor, and the daemon's setting beside it.
    json shown = d.Show(id);
    const std::string given = "devices: GPU0 only (3 GPU device nodes and 0 MIG capability nodes masked)";
    EXPECT_EQ(shown["isolation"], given) << shown.dump();
    EXPECT_EQ(shown["isolation_setting"], "devices") << shown.dump();
    RunResult text = d.Gpulane({"show", std::to_string(id)});
    EXPECT_TRUE(Contains(text.out, "  isolation " + given + "\n")) << text.out;
  }
  fs::remove_all(root);
}

// Per job, not per daemon: with isolation on, a queued job whose GPU's minor number NVML does not
// report starts with the warning in its log, and `show` records that this job was not isolated;
// a job of the same daemon that is still waiting has nothing recorded yet and says so.
TEST_F(DeviceIsolation, ShowRecordsPerJobThatAJobStartedWithoutIsolation) {
  char root_template[] = "/tmp/gpulane-isolation-XXXXXX";
  ASSERT_NE(mkdtemp(root_template), nullptr);
  const fs::path root = root_template;
  json state = MixedModels();
  for (auto& gpu : state["devices"]) gpu.erase("minor");
  DriverTree tree(root, MixedModels());
  DaemonOptions options;
  options.state = state;
  options.daemon_env = tree.env();
  {
    TestDaemon d(options);
    const std::int64_t id = d.Submit({"--gpus", "0", "-o", "job.out", "--", "cat", (tree.dev() / "nvidia1").string()});
    ASSERT_EQ(d.Gpulane({"wait", std::to_string(id)}).exit_code, 0);
    EXPECT_TRUE(Contains(ReadFile(d.work() / "job.out"), "nvidia1")) << "not isolated: every node visible";
    json shown = d.Show(id);
    ASSERT_TRUE(shown["isolation"].is_string()) << shown.dump();
    EXPECT_TRUE(Contains(shown["isolation"].get<std::string>(),
                         "not applied, started with a warning: cannot isolate the job's GPUs: NVML does not report the minor number of GPU0"))
        << shown.dump();
    EXPECT_EQ(shown["isolation_setting"], "devices") << shown.dump();
    const std::int64_t held = d.Submit({"--hold", "--gpus", "0", "--", "true"});
    json waiting = d.Show(held);
    EXPECT_TRUE(waiting["isolation"].is_null()) << waiting.dump();
    RunResult text = d.Gpulane({"show", std::to_string(held)});
    EXPECT_TRUE(Contains(text.out, "  isolation not recorded for this job (the daemon's setting: devices)\n")) << text.out;
  }
  fs::remove_all(root);
}

// GPULANE_ISOLATE_TIMING=1: one line of per-step microseconds on stderr (the lead runs it on the
// GPU machine, bench/isolate_cost.sh prints its medians), and the holder's line timing the
// namespace's teardown after the job. The job's own output and exit are untouched.
TEST_F(DeviceIsolation, TimingSplitPrintsEachStepAndTheTeardownOffThePath) {
  FakeMachine machine(MixedModels());
  DriverTree tree(machine.dir(), machine.state());
  Env env = tree.env();
  env["GPULANE_ISOLATE_TIMING"] = "1";
  const RunResult r = RunOn(machine, {"-g", "0", "--", "echo", "ran"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ran\n");
  for (const char* step : {"gpulane: isolate timing: plan ", " us (spawner); in the child: unshare ", " us, / rslave ",
                           "4 device mask(s) ", "/proc/driver/nvidia (tmpfs, 2 bind(s) back) ", "holder ", " (started); "})
    EXPECT_TRUE(Contains(r.err, step)) << step << "\n" << r.err;
}

// The namespace holder is not the job's: a job that ends at once is not held up by it (it is
// neither a leftover to end with SIGTERM and the kill grace, nor waited for), and it goes by itself.
TEST_F(DeviceIsolation, TheNamespaceHolderIsNotALeftoverAndEndsByItself) {
  FakeMachine machine(MixedModels());
  DriverTree tree(machine.dir(), machine.state());
  std::ofstream(machine.dir() / "config.toml") << "[run]\nkill_grace = \"30s\"\n";
  const auto started = std::chrono::steady_clock::now();
  const RunResult r = RunOn(machine, {"-g", "0", "--", "true"}, tree.env());
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "no leftover ended: the holder ignores the job's signals and is not counted";
  EXPECT_LT(took_s, 20.0) << "the run waited for the kill grace: the holder was taken for a leftover";
}

// A user's job queued on the system daemon is isolated as root, then runs as that user, who can
// neither see the other GPUs' nodes nor undo the masks. The same user's own `gpulane run` (not
// root) is advice-only: every node visible, as `doctor` says. Needs two test users.
TEST_F(DeviceIsolation, AUsersQueuedJobIsIsolatedAndItsOwnRunIsAdviceOnly) {
  TestUser a, b;
  if (auto why = TwoTestUsers(&a, &b)) GTEST_SKIP() << *why;
  char root_template[] = "/tmp/gpulane-isolation-XXXXXX";
  ASSERT_NE(mkdtemp(root_template), nullptr);
  const fs::path root = root_template;
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  DriverTree tree(root, MixedModels());
  {
    TestDaemon d({.state = MixedModels(), .system_mode = true, .daemon_env = tree.env()});
    const std::string dev = tree.dev().string();
    const std::string job = "id -u; umount \"$0/nvidia0\" 2>/dev/null && echo unmounted || echo kept; "
                            "printf '[%s][%s]\\n' \"$(cat \"$0/nvidia0\")\" \"$(cat \"$0/nvidia3\")\"";
    RunResult submitted = d.GpulaneAs(a, {"submit", "--gpus", "0", "-o", "job.out", "--", "sh", "-c", job, dev});
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
    ASSERT_EQ(d.Gpulane({"wait", Lines(submitted.out).at(0)}).exit_code, 0);
    EXPECT_EQ(ReadFile(d.UserDir(a) / "job.out"), fmt::format("{}\nkept\n[][nvidia3]\n", a.uid));
    // Her own gpulane run: not root, so no namespace; no warning either (advice-only is the mode).
    RunResult own = d.GpulaneAs(a, {"run", "--gpus", "0", "--", "cat", dev + "/nvidia0"}, tree.env());
    EXPECT_EQ(own.exit_code, 0) << own.err;
    EXPECT_EQ(own.out, "nvidia0");
    EXPECT_EQ(own.err, "");
    RunResult doctor = d.GpulaneAs(a, {"doctor"});
    EXPECT_TRUE(Contains(doctor.out, "isolation: gpulane run here: advice-only")) << doctor.out;
    EXPECT_TRUE(Contains(doctor.out, "the system daemon's jobs: devices")) << doctor.out;
  }
  fs::remove_all(root);
}

TEST_F(DeviceIsolation, DoctorSaysWhetherJobsAreIsolated) {
  FakeMachine machine(MixedModels());
  RunResult r = RunGpulane({"doctor"}, RunEnv(machine));
  EXPECT_TRUE(Contains(r.out, "ok    isolation: gpulane run here: devices (a mount namespace of its own works here)")) << r.out;
  std::ofstream(machine.dir() / "config.toml") << "[run]\nisolate = \"off\"\n";
  r = RunGpulane({"doctor"}, RunEnv(machine));
  EXPECT_TRUE(Contains(r.out, "warn  isolation: off ([run] isolate)")) << r.out;
}

}  // namespace
}  // namespace gpulane::test
