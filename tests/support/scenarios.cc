#include "support/scenarios.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <stdexcept>

#include "support/harness.h"

namespace gpulane::test {

json RecordedIdleGpu() {
  json gpu = RecordedH200x2(UnusedPid())["devices"][0];
  gpu["processes"] = json::array();
  return gpu;
}

json CloneGpu(const json& base, const std::string& uuid, const std::string& pci_bus_id, unsigned minor) {
  json gpu = base;
  gpu["uuid"] = uuid;
  gpu["pci_bus_id"] = pci_bus_id;
  gpu["minor"] = minor;
  gpu["processes"] = json::array();
  gpu.erase("index");  // the array position is the NVML index
  return gpu;
}

std::string MakeUuid(std::uint32_t tag) { return fmt::format("GPU-{:08x}-92ce-068a-58c5-7c2f58de6be6", tag); }

json& DeviceByBus(json& state, const std::string& pci_bus_id) {
  for (auto& d : state["devices"])
    if (d.value("pci_bus_id", "") == pci_bus_id) return d;
  throw std::runtime_error("no device on " + pci_bus_id);
}

json& DeviceByUuid(json& state, const std::string& uuid) {
  for (auto& d : state["devices"])
    if (d.value("uuid", "") == uuid) return d;
  throw std::runtime_error("no device " + uuid);
}

void SetUsedMemory(json& device, std::uint64_t used) {
  const std::uint64_t total = device["memory"]["total"].get<std::uint64_t>();
  if (used > total) throw std::runtime_error("used memory above total");
  device["memory"] = {{"total", total}, {"used", used}, {"free", total - used}};
}

void SetFreeMemory(json& device, std::uint64_t free) {
  SetUsedMemory(device, device["memory"]["total"].get<std::uint64_t>() - free);
}

void SetUtilization(json& device, unsigned gpu_pct) { device["util"] = {{"gpu", gpu_pct}, {"memory", gpu_pct / 4}}; }

void AddProcess(json& device, std::uint32_t pid, std::uint64_t used_memory_bytes) {
  if (!device.contains("processes") || !device["processes"].is_array()) device["processes"] = json::array();
  device["processes"].push_back({{"pid", pid}, {"used_memory", used_memory_bytes}});
}

void AddGraphicsProcess(json& device, std::uint32_t pid, std::uint64_t used_memory_bytes) {
  if (!device.contains("graphics_processes") || !device["graphics_processes"].is_array())
    device["graphics_processes"] = json::array();
  device["graphics_processes"].push_back({{"pid", pid}, {"used_memory", used_memory_bytes}});
}

void RefuseCall(json& device, const std::string& function, int rc) { device["errors"][function] = rc; }

void LinkGpus(json& a, json& b, unsigned links) {
  a["nvlinks"][b["pci_bus_id"].get<std::string>()] = links;
  b["nvlinks"][a["pci_bus_id"].get<std::string>()] = links;
}

// ---- Machines ---------------------------------------------------------------------------------

namespace {

// The PCI bus IDs of an eight-GPU HGX board, ascending.
const char* const kEightBuses[] = {"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
                                   "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"};

json Machine(json devices) {
  json state = RecordedH200x2(UnusedPid());
  state["devices"] = std::move(devices);
  return state;
}

}  // namespace

std::vector<std::pair<unsigned, unsigned>> EightGpuLinks() {
  return {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {4, 6}, {4, 7}, {5, 6}, {5, 7}};
}

json EightGpus() {
  const json base = RecordedIdleGpu();
  json devices = json::array();
  for (unsigned i = 0; i < 8; ++i) devices.push_back(CloneGpu(base, MakeUuid(0xa0000000u + i), kEightBuses[i], i));
  for (auto [a, b] : EightGpuLinks()) LinkGpus(devices[a], devices[b], 4);
  return Machine(std::move(devices));
}

json MixedModels() {
  const json h200 = RecordedIdleGpu();
  json l40s = CloneGpu(h200, MakeUuid(0xc0000000u), "00000000:C1:00.0", 2);
  l40s["name"] = "NVIDIA L40S";
  l40s["power_limit_mw"] = 350000;
  l40s["memory"] = {{"total", 48305799168ULL}};
  SetUsedMemory(l40s, 567279616ULL);
  json a100 = CloneGpu(h200, MakeUuid(0xb0000000u), "00000000:41:00.0", 0);
  a100["name"] = "NVIDIA A100-SXM4-80GB";
  a100["power_limit_mw"] = 400000;
  a100["memory"] = {{"total", 85899345920ULL}};
  SetUsedMemory(a100, 448790528ULL);
  json devices = json::array({l40s, CloneGpu(h200, MakeUuid(0xa0000001u), "00000000:01:00.0", 3), a100,
                              CloneGpu(h200, MakeUuid(0xa0000002u), "00000000:81:00.0", 1)});
  return Machine(std::move(devices));
}

std::string MigParentUuid() { return MakeUuid(0xd0000000u); }

std::vector<std::string> MigDeviceUuids() {
  return {"MIG-" + MakeUuid(0xd1000000u).substr(4), "MIG-" + MakeUuid(0xd2000000u).substr(4)};
}

json WithMigGpu(std::uint32_t pid_on_mig) {
  json state = RecordedH200x2(UnusedPid());
  json mig = CloneGpu(RecordedIdleGpu(), MigParentUuid(), "00000000:08:00.0", 2);
  SetUsedMemory(mig, 0);
  mig["mig"] = json::array({1, 1});
  mig["util"] = "ERR:NVMLError_NotSupported:Not Supported";  // no per-GPU utilisation in MIG mode
  const std::uint64_t slice = (mig["memory"]["total"].get<std::uint64_t>() / 2) & ~((1ULL << 20) - 1);
  const auto uuids = MigDeviceUuids();
  for (unsigned i = 0; i < uuids.size(); ++i) {
    // Synthetic, not recorded (no MIG-mode recording here): NVML names a MIG device's handle
    // "<GPU name> MIG <profile>"; 3g.71gb is the H200's half-GPU profile (NVIDIA's MIG user guide).
    json m = {{"uuid", uuids[i]}, {"gi", 1 + i}, {"ci", 0}, {"memory", {{"total", slice}, {"used", 0}}},
              {"name", "NVIDIA H200 MIG 3g.71gb"}, {"processes", json::array()}};
    mig["mig_devices"].push_back(std::move(m));
  }
  AddProcess(mig["mig_devices"][0], pid_on_mig, 2ULL << 30);
  mig["mig_devices"][0]["memory"]["used"] = 2ULL << 30;
  state["devices"].push_back(std::move(mig));
  return state;
}

std::string LostGpuUuid() { return MakeUuid(0xe0000000u); }

json WithLostGpu() {
  json state = RecordedH200x2(UnusedPid());
  json lost = CloneGpu(RecordedIdleGpu(), LostGpuUuid(), "00000000:08:00.0", 2);
  SetUsedMemory(lost, 0);
  lost["error"] = 15;  // NVML_ERROR_GPU_IS_LOST on every call
  state["devices"].push_back(std::move(lost));
  return state;
}

// ---- Processes --------------------------------------------------------------------------------

std::string UserName(std::uint32_t uid) {
  struct passwd pw;
  struct passwd* result = nullptr;
  char buf[16384];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &result) == 0 && result) return result->pw_name;
  return std::to_string(uid);
}

ForeignProcess::ForeignProcess() {
  if (geteuid() != 0) {
    pid_ = 1;
    // Usually root's; in a user namespace or a container it may be this user's own (see foreign()).
    std::string status = ReadFile("/proc/1/status");
    auto at = status.find("Uid:");
    uid_ = at == std::string::npos ? 0 : static_cast<std::uint32_t>(std::stoul(status.substr(at + 4)));
    return;
  }
  constexpr uid_t kNobody = 65534;
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(126);
    execl("/bin/sleep", "/bin/sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  started_ = true;
  uid_ = kNobody;
  // Until exec the child is still this program (and briefly root): wait for sleep to run.
  const std::string cmdline = fmt::format("/proc/{}/cmdline", pid_);
  if (!Eventually([&] { return ReadFile(cmdline).rfind("/bin/sleep", 0) == 0; }, 10))
    throw std::runtime_error("the foreign sleep did not start");
}

ForeignProcess::~ForeignProcess() {
  if (!started_) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
}

bool ForeignProcess::foreign() const { return uid_ != getuid(); }

std::string ForeignProcess::user() const { return UserName(uid_); }

std::string ForeignProcess::command() const {
  std::string raw = ReadFile(fmt::format("/proc/{}/cmdline", pid_));
  std::string argv0 = raw.substr(0, raw.find('\0'));
  auto slash = argv0.rfind('/');
  return slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
}

}  // namespace gpulane::test
