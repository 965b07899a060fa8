#pragma once
// Fake-NVML machines for tests, every one derived from the snapshot recorded on real H200s
// (RecordedH200x2): device objects are cloned and given a new identity (UUID, PCI bus ID, minor
// number, name, memory). Field reference: tests/fake_nvml/README.md.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulane::test {

using nlohmann::json;

// ---- Building blocks --------------------------------------------------------------------------

/// The recorded idle H200 (its GPU 0) with no processes: the template every scenario clones.
json RecordedIdleGpu();
/// A clone of `base` with a new identity and no processes.
json CloneGpu(const json& base, const std::string& uuid, const std::string& pci_bus_id, unsigned minor);
/// A GPU UUID in NVML's form whose first group is `tag` (8 hex digits, e.g. 0xa0000003).
std::string MakeUuid(std::uint32_t tag);

/// The device object with this PCI bus ID / UUID (throws if none).
json& DeviceByBus(json& state, const std::string& pci_bus_id);
json& DeviceByUuid(json& state, const std::string& uuid);
/// Sets a GPU's memory so that `free` bytes are free (used = total - free; reserved dropped).
void SetFreeMemory(json& device, std::uint64_t free);
/// Sets used memory (free = total - used).
void SetUsedMemory(json& device, std::uint64_t used);
/// Sets GPU utilisation in percent.
void SetUtilization(json& device, unsigned gpu_pct);
/// Appends a compute process to a GPU (or MIG device) object.
void AddProcess(json& device, std::uint32_t pid, std::uint64_t used_memory_bytes);
/// Appends a graphics process (an X server, an OpenGL or Vulkan program) to a GPU object.
void AddGraphicsProcess(json& device, std::uint32_t pid, std::uint64_t used_memory_bytes);
/// Makes `function` (e.g. "nvmlDeviceGetPowerUsage") fail with NVML code `rc` on this device.
void RefuseCall(json& device, const std::string& function, int rc);
/// Joins two GPUs by `links` NVLinks, recorded on both ends as NVML reports them.
void LinkGpus(json& a, json& b, unsigned links);

// ---- Machines ---------------------------------------------------------------------------------

/// Eight identical idle H200s, NVML order = PCI order, minor = index, UUIDs MakeUuid(0xa0000000 + i)
/// (so "GPU-a000000" is a prefix of all of them). NVLinks: EightGpuLinks().
json EightGpus();
/// The NVLinked pairs of EightGpus() as PCI indices: (0,1) (2,3) (4,5) (6,7), and 4,5,6,7 all linked.
std::vector<std::pair<unsigned, unsigned>> EightGpuLinks();

/// Four GPUs of three models whose NVML order (array order) differs from PCI bus order and whose
/// minor numbers differ from both. By NVML index: 0 L40S on C1 minor 2; 1 H200 on 01 minor 3;
/// 2 A100 on 41 minor 0; 3 H200 on 81 minor 1. PCI order is 01, 41, 81, C1.
json MixedModels();

/// The recorded two H200s plus a third, MIG-enabled H200 (PCI index 2, the freest) with two MIG
/// devices; `pid_on_mig` runs on the first MIG device.
json WithMigGpu(std::uint32_t pid_on_mig);
/// UUID of the MIG-enabled GPU of WithMigGpu() and of its MIG devices.
std::string MigParentUuid();
std::vector<std::string> MigDeviceUuids();

/// The recorded two H200s plus a third H200 (NVML index 2, bus 00000000:08:00.0) on which every
/// NVML call fails with NVML_ERROR_GPU_IS_LOST, and which would otherwise be the freest.
json WithLostGpu();
/// UUID the lost GPU had before it was lost (NVML cannot report it now).
std::string LostGpuUuid();

// ---- Processes --------------------------------------------------------------------------------

/// A process of another user: as root, `sleep` run as nobody (uid 65534); otherwise pid 1 (normally root's).
/// Ends the process it started when destroyed.
class ForeignProcess {
 public:
  ForeignProcess();
  ~ForeignProcess();
  ForeignProcess(const ForeignProcess&) = delete;
  ForeignProcess& operator=(const ForeignProcess&) = delete;

  std::uint32_t pid() const { return static_cast<std::uint32_t>(pid_); }
  std::uint32_t uid() const { return uid_; }
  /// False only where pid 1 belongs to the user running the tests (tests then skip).
  bool foreign() const;
  /// The owner's login name as this machine's user database gives it.
  std::string user() const;
  /// The basename of its argv[0] as /proc shows it ("sleep", or pid 1's program).
  std::string command() const;

 private:
  pid_t pid_ = -1;
  bool started_ = false;
  std::uint32_t uid_ = 0;
};

/// The login name of `uid` (the uid as text when it has none), as gpulane should show it.
std::string UserName(std::uint32_t uid);

}  // namespace gpulane::test
