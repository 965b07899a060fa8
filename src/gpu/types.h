#pragma once
// What gpulane knows of the GPUs at one moment. Every optional field is absent when the GPU or the
// driver does not report it: gpulane never makes a number up.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpulane {

/// NVML compute mode (nvmlComputeMode_t, "Device Enums" in the NVML reference).
enum class ComputeMode { kDefault, kExclusiveThread, kProhibited, kExclusiveProcess };

/// Which of NVML's process lists a process is on, like the Type column of nvidia-smi (C, G, C+G):
/// a compute context (CUDA, OpenCL: nvmlDeviceGetComputeRunningProcesses), a graphics context
/// (an X server, OpenGL, Vulkan: nvmlDeviceGetGraphicsRunningProcesses), or both.
enum class ProcessKind { kCompute, kGraphics, kComputeAndGraphics };

/// The kind of a process found on both lists' kinds `a` and `b`.
inline ProcessKind Combine(ProcessKind a, ProcessKind b) { return a == b ? a : ProcessKind::kComputeAndGraphics; }

/// A process with a context on a GPU (NVML's compute and graphics lists, merged by pid), with what
/// /proc tells of it.
struct GpuProcess {
  std::uint32_t pid = 0;
  ProcessKind kind = ProcessKind::kCompute;
  /// Absent when NVML reports "not available". For a process on both lists, the larger figure of
  /// the two (each list reports the process's memory, so adding them would count it twice).
  std::optional<std::uint64_t> used_memory_bytes;
  std::optional<std::string> mig_uuid;             ///< the MIG device it runs on, if any
  // Filled from /proc/<pid> where readable (ProcessTable); absent when the pid is not visible here,
  // e.g. from inside a container without the host's PID namespace.
  std::optional<std::uint32_t> uid;
  std::optional<std::string> user;
  std::optional<std::string> command;  ///< basename of argv[0], e.g. "python"
  std::optional<std::string> cmdline;  ///< the whole command line, arguments joined by spaces
  /// Its share of the GPU's SM time in the driver's last sample period (ReadOptions::telemetry;
  /// nvmlDeviceGetProcessUtilization, which lists only processes with non-zero use: one not listed
  /// is 0). Absent when not asked for, or the GPU does not report it.
  std::optional<unsigned> sm_util_pct;
};

/// The MIG profile at the end of a MIG device's name: "NVIDIA H200 MIG 1g.18gb" -> "1g.18gb" (NVML
/// names a MIG device's handle "<GPU name> MIG <profile>"); nullopt when the name has no " MIG ".
inline std::optional<std::string> MigProfileOfName(const std::string& name) {
  const auto at = name.rfind(" MIG ");
  if (at == std::string::npos) return std::nullopt;
  std::string profile = name.substr(at + 5);
  while (!profile.empty() && (profile.back() == ' ' || profile.back() == '\0')) profile.pop_back();
  if (profile.empty() || profile.find(' ') != std::string::npos) return std::nullopt;
  return profile;
}

/// A MIG device (a GPU instance + compute instance) of a MIG-enabled GPU.
struct MigDevice {
  std::string uuid;  ///< "MIG-..."
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<std::uint64_t> memory_used_bytes;
  /// Its profile, e.g. "1g.18gb": the end of the name NVML gives a MIG device's handle
  /// (nvmlDeviceGetName: "NVIDIA H200 MIG 1g.18gb", MigProfileOfName). nullopt: not reported.
  std::optional<std::string> profile;
};

/// NVLink connections from one GPU to another (nvmlDeviceGetNvLinkState/RemotePciInfo_v2).
struct NvLinkPeer {
  std::string pci_bus_id;  ///< the remote end: a GPU or an NVSwitch
  unsigned links = 0;      ///< active links to it
};

/// One physical GPU.
struct GpuDevice {
  unsigned nvml_index = 0;  ///< NVML's own numbering (not CUDA's, not the minor number)
  unsigned pci_index = 0;   ///< position in PCI bus order = CUDA index with CUDA_DEVICE_ORDER=PCI_BUS_ID
  std::optional<unsigned> minor_number;  ///< N of /dev/nvidiaN
  std::string uuid;                      ///< "GPU-..."; empty only if NVML refused it
  std::string pci_bus_id;                ///< "00000000:00:06.0": 8-digit domain, upper-case hex
  std::optional<std::string> name;
  std::optional<std::string> error;      ///< set when the GPU failed (e.g. "NVML_ERROR_GPU_IS_LOST")

  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<std::uint64_t> memory_used_bytes;      ///< excludes driver-reserved memory (as nvidia-smi)
  std::optional<std::uint64_t> memory_free_bytes;
  std::optional<std::uint64_t> memory_reserved_bytes;  ///< only from nvmlDeviceGetMemoryInfo_v2
  std::optional<unsigned> utilization_gpu_pct;
  std::optional<unsigned> utilization_memory_pct;
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> power_draw_mw;
  std::optional<unsigned> power_limit_mw;
  std::optional<unsigned> performance_state;  ///< N of PN; 0 is the fastest
  std::optional<ComputeMode> compute_mode;
  std::optional<bool> persistence_mode;
  std::optional<bool> mig_enabled;
  std::vector<MigDevice> mig_devices;
  /// Compute and graphics processes; absent when either list could not be read (unknown, not none).
  std::optional<std::vector<GpuProcess>> processes;
  std::vector<NvLinkPeer> nvlink_peers;

  // Telemetry, read only with ReadOptions::telemetry (the daemon's sampler); absent when the GPU
  // or the driver does not report it.
  std::optional<std::uint64_t> energy_mj;     ///< nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded
  std::optional<unsigned> clock_sm_mhz;       ///< nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
  std::optional<unsigned> clock_mem_mhz;      ///< nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)
  /// Why the clocks are below their maximum: nvmlClocksEventReason* bits (nvml_api.h), from
  /// nvmlDeviceGetCurrentClocksEventReasons (or ...ThrottleReasons on drivers before 535).
  std::optional<std::uint64_t> clocks_event_reasons;
  /// Uncorrected ECC errors since the driver loaded (nvmlDeviceGetTotalEccErrors, volatile).
  std::optional<std::uint64_t> ecc_uncorrected_volatile;
  /// Xid errors NVML reported for this GPU since the backend's previous telemetry read, in order
  /// (nvmlEventTypeXidCriticalError events); absent when they cannot be watched on this GPU.
  std::optional<std::vector<std::uint64_t>> xid_errors;

  // What the daemon's sampler says of the GPU (daemon snapshots only; telemetry/anomaly.h).
  /// Why the GPU takes no new jobs now (an Xid error, a lost GPU); nullopt: it does.
  std::optional<std::string> drained;
  /// Its anomalies going on now, one line each ("job 12 (alice) has used GPU 1 under 5 % for ...").
  std::vector<std::string> anomalies;

  bool failed() const { return error.has_value(); }
};

/// Every GPU of the machine at one moment, in PCI bus order.
struct GpuSnapshot {
  std::optional<std::string> driver_version;
  std::optional<std::string> nvml_version;
  std::optional<int> cuda_driver_version;  ///< e.g. 13000 for CUDA 13.0
  std::vector<GpuDevice> devices;           ///< sorted by PCI bus ID; devices[i].pci_index == i
  /// Lines for people from the daemon that took the snapshot ("the job store is unavailable since
  /// 14:02: ..."); empty when NVML was read directly.
  std::vector<std::string> warnings;

  /// True when NVML's numbering differs from PCI bus order (CUDA with PCI_BUS_ID, and gpulane).
  bool nvml_order_differs() const {
    for (const auto& d : devices)
      if (d.nvml_index != d.pci_index) return true;
    return false;
  }
  /// The device with this UUID, or nullptr.
  const GpuDevice* FindByUuid(const std::string& uuid) const {
    for (const auto& d : devices)
      if (d.uuid == uuid) return &d;
    return nullptr;
  }
};

}  // namespace gpulane
