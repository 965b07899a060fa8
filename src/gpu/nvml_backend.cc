#include "gpu/nvml_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <fmt/format.h>

#include "gpu/nvml_opener.h"
#include "gpu/ordering.h"

namespace gpulane {
namespace {

using nvml::Api;

// True for codes that mean the GPU itself is unusable, as opposed to one field being unavailable.
bool IsDeviceFailure(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_GPU_NOT_FOUND:
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_TIMEOUT:
    case NVML_ERROR_IRQ_ISSUE:
    case NVML_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

// Reads one GPU, recording the first device failure; every Get* returns whether it succeeded.
class DeviceReader {
 public:
  DeviceReader(const Api& api, nvmlDevice_t handle, GpuDevice& device)
      : api_(api), h_(handle), d_(device) {}

  // Interprets a return code: true on success; marks the device failed on a failure code.
  bool Check(nvmlReturn_t rc) {
    if (rc == NVML_SUCCESS) return true;
    if (IsDeviceFailure(rc) && !d_.error) d_.error = nvml::ErrorName(rc);
    return false;
  }
  bool failed() const { return d_.error.has_value(); }

  void ReadIdentity() {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (api_.DeviceGetUUID && Check(api_.DeviceGetUUID(h_, buf, sizeof buf))) d_.uuid = buf;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (!failed() && api_.DeviceGetName && Check(api_.DeviceGetName(h_, name, sizeof name))) d_.name = name;
    unsigned minor = 0;
    if (!failed() && api_.DeviceGetMinorNumber && Check(api_.DeviceGetMinorNumber(h_, &minor)))
      d_.minor_number = minor;
    if (failed()) return;
    if (api_.DeviceGetPciInfoV3) {
      nvmlPciInfo_t pci{};
      if (Check(api_.DeviceGetPciInfoV3(h_, &pci))) d_.pci_bus_id = NormalizePciBusId(pci.busId);
    } else if (api_.DeviceGetPciInfoLegacy) {
      nvmlPciInfoLegacy_t pci{};
      if (Check(api_.DeviceGetPciInfoLegacy(h_, &pci))) d_.pci_bus_id = NormalizePciBusId(pci.busId);
    }
  }

  void ReadMemory() {
    if (api_.DeviceGetMemoryInfoV2) {
      nvmlMemory_v2_t mem{};
      mem.version = nvmlMemory_v2;
      nvmlReturn_t rc = api_.DeviceGetMemoryInfoV2(h_, &mem);
      if (Check(rc)) {
        d_.memory_total_bytes = mem.total;
        d_.memory_reserved_bytes = mem.reserved;
        d_.memory_free_bytes = mem.free;
        d_.memory_used_bytes = mem.used;
        return;
      }
      if (failed()) return;
    }
    if (api_.DeviceGetMemoryInfo) {
      nvmlMemory_t mem{};
      if (Check(api_.DeviceGetMemoryInfo(h_, &mem))) {
        d_.memory_total_bytes = mem.total;
        d_.memory_free_bytes = mem.free;
        d_.memory_used_bytes = mem.used;
      }
    }
  }

  void ReadState(const ReadOptions& options) {
    nvmlUtilization_t util{};
    if (options.utilization && api_.DeviceGetUtilizationRates && Check(api_.DeviceGetUtilizationRates(h_, &util))) {
      d_.utilization_gpu_pct = util.gpu;
      d_.utilization_memory_pct = util.memory;
    }
    if (options.sensors && !failed()) ReadSensors();
    int state = 0;
    if (!failed() && api_.DeviceGetComputeMode && Check(api_.DeviceGetComputeMode(h_, &state)) && state >= 0 &&
        state <= 3)
      d_.compute_mode = static_cast<ComputeMode>(state);
    if (!failed() && api_.DeviceGetPersistenceMode && Check(api_.DeviceGetPersistenceMode(h_, &state)))
      d_.persistence_mode = state == NVML_FEATURE_ENABLED;
    unsigned current = 0, pending = 0;
    if (!failed() && api_.DeviceGetMigMode && Check(api_.DeviceGetMigMode(h_, &current, &pending)))
      d_.mig_enabled = current == 1;
  }

  void ReadSensors() {
    unsigned value = 0;
    if (api_.DeviceGetTemperature && Check(api_.DeviceGetTemperature(h_, NVML_TEMPERATURE_GPU, &value)))
      d_.temperature_c = value;
    if (!failed() && api_.DeviceGetPowerUsage && Check(api_.DeviceGetPowerUsage(h_, &value))) d_.power_draw_mw = value;
    if (!failed() && api_.DeviceGetEnforcedPowerLimit && Check(api_.DeviceGetEnforcedPowerLimit(h_, &value)))
      d_.power_limit_mw = value;
    int state = 0;
    if (!failed() && api_.DeviceGetPerformanceState && Check(api_.DeviceGetPerformanceState(h_, &state)) &&
        state >= 0 && state <= 15)
      d_.performance_state = static_cast<unsigned>(state);
  }

  // The telemetry fields (ReadOptions::telemetry) but per-process utilisation (ReadProcessUtilization)
  // and Xid errors (NvmlBackend::DrainXids).
  void ReadTelemetry() {
    unsigned long long energy = 0;
    if (api_.DeviceGetTotalEnergyConsumption && Check(api_.DeviceGetTotalEnergyConsumption(h_, &energy)))
      d_.energy_mj = energy;
    unsigned mhz = 0;
    if (!failed() && api_.DeviceGetClockInfo && Check(api_.DeviceGetClockInfo(h_, NVML_CLOCK_SM, &mhz)))
      d_.clock_sm_mhz = mhz;
    if (!failed() && api_.DeviceGetClockInfo && Check(api_.DeviceGetClockInfo(h_, NVML_CLOCK_MEM, &mhz)))
      d_.clock_mem_mhz = mhz;
    unsigned long long bits = 0;
    if (!failed() && api_.DeviceGetCurrentClocksEventReasons && Check(api_.DeviceGetCurrentClocksEventReasons(h_, &bits)))
      d_.clocks_event_reasons = bits;
    unsigned long long ecc = 0;
    if (!failed() && api_.DeviceGetTotalEccErrors &&
        Check(api_.DeviceGetTotalEccErrors(h_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc)))
      d_.ecc_uncorrected_volatile = ecc;
  }

  // Each listed process's SM utilisation since `*last_seen_us` (NVML's CPU time stamp of the
  // newest sample read before; 0 the first time: every sample the driver keeps), the mean of its
  // samples (nvmlDeviceGetProcessUtilization, "Device Queries": one sample per process with non-zero
  // utilisation in a sample period; NVML_ERROR_NOT_FOUND when there is none since the time stamp).
  // A listed process without a sample used none: 0. Left absent when the call fails or is missing.
  void ReadProcessUtilization(unsigned long long* last_seen_us) {
    if (!api_.DeviceGetProcessUtilization || !d_.processes || failed()) return;
    unsigned count = 0;
    nvmlReturn_t rc = api_.DeviceGetProcessUtilization(h_, nullptr, &count, *last_seen_us);
    std::vector<nvmlProcessUtilizationSample_t> samples;
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE || (rc == NVML_SUCCESS && count > 0)) {
      count += 16;
      samples.assign(count, nvmlProcessUtilizationSample_t{});
      rc = api_.DeviceGetProcessUtilization(h_, samples.data(), &count, *last_seen_us);
      samples.resize(rc == NVML_SUCCESS ? std::min<std::size_t>(count, samples.size()) : 0);
    }
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_FOUND) {
      Check(rc);
      return;
    }
    for (auto& p : *d_.processes) {
      unsigned long long sum = 0, n = 0;
      for (const auto& sample : samples)
        if (sample.pid == p.pid) sum += sample.smUtil, ++n;
      p.sm_util_pct = static_cast<unsigned>(n ? std::min<unsigned long long>(100, (sum + n / 2) / n) : 0);
    }
    for (const auto& sample : samples) *last_seen_us = std::max(*last_seen_us, sample.timeStamp);
  }

  void ReadMig() {
    if (!d_.mig_enabled.value_or(false) || !api_.DeviceGetMaxMigDeviceCount || !api_.DeviceGetMigDeviceHandleByIndex)
      return;
    unsigned max_count = 0;
    if (!Check(api_.DeviceGetMaxMigDeviceCount(h_, &max_count))) return;
    for (unsigned i = 0; i < max_count && !failed(); ++i) {
      nvmlDevice_t mig = nullptr;
      if (!Check(api_.DeviceGetMigDeviceHandleByIndex(h_, i, &mig))) continue;  // empty slot: NOT_FOUND
      MigDevice m;
      char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (api_.DeviceGetUUID && Check(api_.DeviceGetUUID(mig, buf, sizeof buf))) m.uuid = buf;
      char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
      if (api_.DeviceGetName && Check(api_.DeviceGetName(mig, name, sizeof name))) m.profile = MigProfileOfName(name);
      unsigned id = 0;
      if (api_.DeviceGetGpuInstanceId && Check(api_.DeviceGetGpuInstanceId(mig, &id))) m.gpu_instance_id = id;
      if (api_.DeviceGetComputeInstanceId && Check(api_.DeviceGetComputeInstanceId(mig, &id)))
        m.compute_instance_id = id;
      nvmlMemory_t mem{};
      if (api_.DeviceGetMemoryInfo && Check(api_.DeviceGetMemoryInfo(mig, &mem))) {
        m.memory_total_bytes = mem.total;
        m.memory_used_bytes = mem.used;
      }
      mig_handles_.push_back(mig);
      d_.mig_devices.push_back(std::move(m));
    }
  }

  // The GPU's processes: its compute list and its graphics list, over the GPU and its MIG devices,
  // merged by pid (MergeProcess). Unknown (left absent) when the compute list cannot be read, or
  // the graphics list fails with anything but NVML_ERROR_NOT_SUPPORTED; a driver without the
  // graphics calls, or a GPU that does not support them, leaves the compute processes as the list.
  void ReadProcesses() {
    std::vector<GpuProcess> list;
    const ListRead compute = ReadKind(ProcessKind::kCompute, list);
    if (failed() || compute != ListRead::kRead) return;
    const ListRead graphics = ReadKind(ProcessKind::kGraphics, list);
    if (failed() || graphics == ListRead::kFailed) return;
    d_.processes = std::move(list);
  }

  void ReadNvLinks() {
    if (!api_.DeviceGetNvLinkState || !api_.DeviceGetNvLinkRemotePciInfo) return;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      int active = 0;
      nvmlReturn_t rc = api_.DeviceGetNvLinkState(h_, link, &active);
      if (rc != NVML_SUCCESS) {
        Check(rc);
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT || failed()) return;
        continue;
      }
      if (active != NVML_FEATURE_ENABLED) continue;
      nvmlPciInfo_t pci{};
      if (!Check(api_.DeviceGetNvLinkRemotePciInfo(h_, link, &pci))) continue;
      std::string remote = NormalizePciBusId(pci.busId);
      bool found = false;
      for (auto& peer : d_.nvlink_peers) {
        if (peer.pci_bus_id == remote) {
          ++peer.links;
          found = true;
        }
      }
      if (!found) d_.nvlink_peers.push_back({remote, 1});
    }
  }

 private:
  // How reading one process list went.
  enum class ListRead { kRead, kUnsupported, kFailed };

  // One list over several handles: read when any handle's list was read (a MIG-enabled GPU may
  // refuse the aggregate list to unprivileged callers yet answer for each MIG device), else failed
  // when one failed, else unsupported.
  static ListRead Either(ListRead a, ListRead b) {
    if (a == ListRead::kRead || b == ListRead::kRead) return ListRead::kRead;
    if (a == ListRead::kFailed || b == ListRead::kFailed) return ListRead::kFailed;
    return ListRead::kUnsupported;
  }

  // Reads the `kind` list of the GPU and of each of its MIG devices into `out`.
  ListRead ReadKind(ProcessKind kind, std::vector<GpuProcess>& out) {
    ListRead result = ReadListOf(kind, h_, std::nullopt, out);
    for (std::size_t i = 0; i < mig_handles_.size() && !failed(); ++i)
      result = Either(result, ReadListOf(kind, mig_handles_[i], d_.mig_devices[i].uuid, out));
    return result;
  }

  // Reads the `kind` list of `handle` (the GPU or one of its MIG devices): through the versioned
  // entry (nvmlDeviceGet{Compute,Graphics}RunningProcesses_v3, else _v2: 24-byte records) when the
  // driver has one, else the unversioned call (16-byte records). kUnsupported when the driver has
  // neither ("function missing", not "no driver") or answers NVML_ERROR_NOT_SUPPORTED. An error of
  // the versioned call does not fall back to the older one: the driver has spoken.
  ListRead ReadListOf(ProcessKind kind, nvmlDevice_t handle, const std::optional<std::string>& mig_uuid,
                      std::vector<GpuProcess>& out) {
    const bool compute = kind == ProcessKind::kCompute;
    auto* versioned = compute ? api_.DeviceGetComputeRunningProcesses : api_.DeviceGetGraphicsRunningProcesses;
    auto* unversioned = compute ? api_.DeviceGetComputeRunningProcessesV1 : api_.DeviceGetGraphicsRunningProcessesV1;
    if (versioned) return ReadList<nvmlProcessInfo_t>(versioned, kind, handle, mig_uuid, out);
    if (unversioned) return ReadList<nvmlProcessInfo_v1_t>(unversioned, kind, handle, mig_uuid, out);
    return ListRead::kUnsupported;
  }

  // One call of the NVML process-list protocol ("Device Queries" in the NVML API reference, for
  // nvmlDeviceGetComputeRunningProcesses and nvmlDeviceGetGraphicsRunningProcesses alike): with
  // *infoCount = 0 (infos may be NULL) it answers NVML_SUCCESS when there are no processes, or
  // NVML_ERROR_INSUFFICIENT_SIZE with the count needed written to *infoCount. Processes can appear
  // between the calls ("allocate more space for infos table in case new processes are spawned"),
  // so allocate with headroom and retry while the answer is still INSUFFICIENT_SIZE.
  // usedGpuMemory NVML_VALUE_NOT_AVAILABLE means the figure is not available: left absent.
  template <typename Record, typename Fn>
  ListRead ReadList(Fn* fn, ProcessKind kind, nvmlDevice_t handle, const std::optional<std::string>& mig_uuid,
                    std::vector<GpuProcess>& out) {
    unsigned count = 0;
    nvmlReturn_t rc = fn(handle, &count, nullptr);
    if (rc == NVML_SUCCESS) return ListRead::kRead;  // no processes
    std::vector<Record> records;
    for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
      count += 16;
      records.assign(count, Record{});
      rc = fn(handle, &count, records.data());
    }
    if (rc == NVML_ERROR_NOT_SUPPORTED) return ListRead::kUnsupported;
    if (!Check(rc)) return ListRead::kFailed;
    for (unsigned i = 0; i < count && i < records.size(); ++i) {
      GpuProcess p;
      p.pid = records[i].pid;
      p.kind = kind;
      if (records[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) p.used_memory_bytes = records[i].usedGpuMemory;
      p.mig_uuid = mig_uuid;
      MergeProcess(out, std::move(p));
    }
    return ListRead::kRead;
  }

  // Adds `p` to `list`, or merges it into the entry of its pid: a process on both the compute and
  // the graphics list (or on the GPU's list and a MIG device's) is one process. Its kind is both;
  // its memory the larger known figure, as each list reports the process's whole usedGpuMemory and
  // a sum would count it twice.
  static void MergeProcess(std::vector<GpuProcess>& list, GpuProcess p) {
    for (auto& q : list) {
      if (q.pid != p.pid) continue;
      q.kind = Combine(q.kind, p.kind);
      if (p.mig_uuid) q.mig_uuid = p.mig_uuid;
      if (p.used_memory_bytes && (!q.used_memory_bytes || *p.used_memory_bytes > *q.used_memory_bytes))
        q.used_memory_bytes = p.used_memory_bytes;
      return;
    }
    list.push_back(std::move(p));
  }

  const Api& api_;
  nvmlDevice_t h_;
  GpuDevice& d_;
  std::vector<nvmlDevice_t> mig_handles_;
};

// NVLink peers as NVML's P2P status sees them (nvmlDeviceGetP2PStatus, NVML_P2P_CAPS_INDEX_NVLINK).
// The remote end of a link is often not the other GPU: an NVSwitch on HGX boards, or, in some VMs,
// a placeholder bus ID (FFFFFFFF:FF:FF.0 was seen on a 2 x H200 VM whose GPUs nvidia-smi shows
// as NV18). So a pair the P2P status calls NVLink-capable is linked, with the links counted to that
// GPU directly where the remote bus IDs show them, else all of the GPU's active links.
void LinkPeersByP2P(const Api& api, const std::vector<nvmlDevice_t>& handles, std::vector<GpuDevice>& devices) {
  if (!api.DeviceGetP2PStatus) return;
  const std::size_t n = devices.size();
  std::vector<std::vector<bool>> linked(n, std::vector<bool>(n, false));
  bool any = false;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      if (!handles[i] || !handles[j] || devices[i].failed() || devices[j].failed()) continue;
      int status = -1;
      if (api.DeviceGetP2PStatus(handles[i], handles[j], NVML_P2P_CAPS_INDEX_NVLINK, &status) == NVML_SUCCESS &&
          status == NVML_P2P_STATUS_OK)
        linked[i][j] = linked[j][i] = any = true;
    }
  if (!any) return;  // keep what the per-link remote bus IDs said
  for (std::size_t i = 0; i < n; ++i) {
    unsigned total = 0;
    for (const auto& peer : devices[i].nvlink_peers) total += peer.links;
    std::vector<NvLinkPeer> peers;
    for (std::size_t j = 0; j < n; ++j) {
      if (!linked[i][j]) continue;
      unsigned direct = 0;
      for (const auto& peer : devices[i].nvlink_peers)
        if (peer.pci_bus_id == devices[j].pci_bus_id) direct = peer.links;
      peers.push_back({devices[j].pci_bus_id, direct ? direct : total});
    }
    devices[i].nvlink_peers = std::move(peers);
  }
}

}  // namespace

Result<std::unique_ptr<NvmlBackend>> NvmlBackend::Open(const Clock& clock, const std::string& path) {
  auto library = nvml::Library::Open(path);
  if (!library) return library.error();
  if (std::getenv("GPULANE_TIMING"))
    fmt::print(stderr, "gpulane: timing: dlopen {:.2f} ms, resolve {:.2f} ms, nvmlInit {:.2f} ms\n", (*library)->dlopen_ms(),
               (*library)->resolve_ms(), (*library)->init_ms());
  return std::make_unique<NvmlBackend>(std::move(library).value(), clock);
}

Result<std::unique_ptr<GpuBackend>> NvmlOpener::Open() {
  auto backend = NvmlBackend::Open(clock_);
  if (!backend) return backend.error();
  return std::unique_ptr<GpuBackend>(std::move(backend).value());
}

Result<GpuSnapshot> NvmlBackend::Read(const ReadOptions& options) {
  struct Report {
    const Clock& clock;
    double start_s;
    ~Report() {
      if (std::getenv("GPULANE_TIMING"))
        fmt::print(stderr, "gpulane: timing: read all GPUs {:.2f} ms\n", (clock.MonotonicS() - start_s) * 1e3);
    }
  } report{clock_, clock_.MonotonicS()};
  const Api& api = library_->api();
  GpuSnapshot snap;
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (api.SystemGetDriverVersion && api.SystemGetDriverVersion(buf, sizeof buf) == NVML_SUCCESS)
    snap.driver_version = buf;
  if (api.SystemGetNVMLVersion && api.SystemGetNVMLVersion(buf, sizeof buf) == NVML_SUCCESS) snap.nvml_version = buf;
  int cuda = 0;
  if (api.SystemGetCudaDriverVersion && api.SystemGetCudaDriverVersion(&cuda) == NVML_SUCCESS)
    snap.cuda_driver_version = cuda;

  unsigned count = 0;
  nvmlReturn_t rc = api.DeviceGetCount(&count);
  if (rc != NVML_SUCCESS)
    return MakeError(ErrorKind::kNvml, fmt::format("NVML could not count the GPUs (nvmlDeviceGetCount: {}): check "
                                                   "the driver with nvidia-smi",
                                                   nvml::ErrorName(rc)));
  snap.devices.resize(count);
  // One thread per GPU: NVML is thread-safe, and each GPU's first queries in a process wait on the
  // driver for milliseconds, so reading 8 GPUs one after another would cost 8 times that.
  std::vector<nvmlDevice_t> handles(count, nullptr);
  if (options.telemetry && last_seen_us_.size() < count) last_seen_us_.resize(count, 0);
  auto read_one = [this, &api, &options, &handles](unsigned i, GpuDevice& d) {
    d.nvml_index = i;
    nvmlDevice_t& handle = handles[i];
    nvmlReturn_t rc = api.DeviceGetHandleByIndex(i, &handle);
    if (rc != NVML_SUCCESS) {
      d.error = nvml::ErrorName(rc);
      return;
    }
    DeviceReader reader(api, handle, d);
    reader.ReadIdentity();
    if (!reader.failed()) reader.ReadMemory();
    if (!reader.failed()) reader.ReadState(options);
    if (!reader.failed()) reader.ReadMig();
    if (!reader.failed()) reader.ReadProcesses();
    if (!reader.failed() && options.topology) reader.ReadNvLinks();
    if (!reader.failed() && options.telemetry) {
      reader.ReadTelemetry();
      reader.ReadProcessUtilization(&last_seen_us_[i]);
    }
  };
  if (count == 1 || !options.parallel) {
    for (unsigned i = 0; i < count; ++i) read_one(i, snap.devices[i]);
  } else {
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < count; ++i) threads.emplace_back(read_one, i, std::ref(snap.devices[i]));
    for (auto& t : threads) t.join();
  }
  if (options.topology) LinkPeersByP2P(api, handles, snap.devices);
  if (options.telemetry) DrainXids(handles, snap.devices);
  SortByPciBusId(snap.devices);
  return snap;
}

NvmlBackend::~NvmlBackend() {
  if (xid_set_ && library_->api().EventSetFree) library_->api().EventSetFree(xid_set_);
}

void NvmlBackend::DrainXids(const std::vector<nvmlDevice_t>& handles, std::vector<GpuDevice>& devices) {
  const Api& api = library_->api();
  if (!api.EventSetCreate || !api.DeviceRegisterEvents || !api.EventSetWait) return;
  if (!xid_set_ && !xid_set_failed_) xid_set_failed_ = api.EventSetCreate(&xid_set_) != NVML_SUCCESS;
  if (!xid_set_) return;
  if (xid_watch_.size() < handles.size()) xid_watch_.resize(handles.size(), XidWatch::kNotYet);
  // Devices are still in NVML order here (devices[i].nvml_index == i).
  for (std::size_t i = 0; i < handles.size(); ++i) {
    if (!handles[i] || devices[i].failed()) continue;
    if (xid_watch_[i] == XidWatch::kNotYet)
      xid_watch_[i] = api.DeviceRegisterEvents(handles[i], nvmlEventTypeXidCriticalError, xid_set_) == NVML_SUCCESS
                          ? XidWatch::kWatched
                          : XidWatch::kUnsupported;
    if (xid_watch_[i] == XidWatch::kWatched) devices[i].xid_errors.emplace();
  }
  // Events wait in the set between reads; take them all (a bounded number: a storm of them must
  // not hold the sampler).
  for (int n = 0; n < 1024; ++n) {
    nvmlEventData_t data{};
    if (api.EventSetWait(xid_set_, &data, 0) != NVML_SUCCESS) break;
    if (!(data.eventType & nvmlEventTypeXidCriticalError)) continue;
    for (std::size_t i = 0; i < handles.size(); ++i)
      if (handles[i] == data.device && devices[i].xid_errors) devices[i].xid_errors->push_back(data.eventData);
  }
}

}  // namespace gpulane
