// A fake libnvidia-ml.so.1 for tests on machines without a GPU. It exports the NVML entry points
// gpulane uses (the prototypes of src/nvml/nvml_api.h) and answers from a JSON state file named by
// $FAKE_NVML_STATE, re-read whenever the file changes (tests replace it atomically with rename), so
// a test can add a process or fill a GPU's memory while gpulane runs.
//
// The state file is a superset of the snapshots recorded on real GPUs
// (tests/fixtures/*/nvml_snapshot.json); see tests/fake_nvml/README.md for every field.
// Build variants leave out newer symbols, as older drivers do:
//   FAKE_NVML_WITHOUT_V3_PROCESSES  no nvmlDeviceGet{Compute,Graphics}RunningProcesses_v3 (drivers 535.43-535.98)
//   FAKE_NVML_LEGACY                also no _v2 process call, no MemoryInfo_v2, no PciInfo_v3 (drivers < 510)
//   FAKE_NVML_WITHOUT_GRAPHICS_PROCESSES  no nvmlDeviceGetGraphicsRunningProcesses* at all (no real
//                                   driver: tests "function missing" for the graphics list)
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nvml/nvml_api.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using nlohmann::json;

constexpr int kMaxDevices = 64;
constexpr int kMaxMig = 8;

// Handles point into this array: [0, kMaxDevices) GPUs, then kMaxMig MIG slots per GPU.
struct Handle {
  int device;
  int mig;  // -1 for the GPU itself
};
Handle g_handles[kMaxDevices * (kMaxMig + 1)];

struct State {
  std::mutex mu;
  json doc;
  bool loaded = false;
  bool initialised = false;
  int init_count = 0;  // nvmlInit is reference-counted: nvmlShutdown ends NVML at the last one
  ino_t ino = 0;
  timespec mtime{};
  off_t size = -1;
};

State& S() {
  static State s;
  return s;
}

// With $FAKE_NVML_DEV_ROOT, as the driver does: a GPU whose <root>/nvidia<minor> is missing or is
// /dev/null (a job's device isolation masks it so) does not exist for this process's NVML.
void HideMaskedDevices(json& doc) {
  const char* root = std::getenv("FAKE_NVML_DEV_ROOT");
  if (!root || !*root || !doc.contains("devices") || !doc["devices"].is_array()) return;
  json kept = json::array();
  for (auto& dev : doc["devices"]) {
    if (!dev.contains("minor") || !dev["minor"].is_number_unsigned()) continue;
    const std::string node = std::string(root) + "/nvidia" + std::to_string(dev["minor"].get<unsigned>());
    struct stat st {};
    if (stat(node.c_str(), &st) != 0 || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))) continue;
    kept.push_back(std::move(dev));
  }
  doc["devices"] = std::move(kept);
}

// Re-reads the state file when its inode, size or mtime changed. Keeps the old state if the new
// file cannot be parsed (a test writing it in place rather than renaming).
void Refresh(State& s) {
  const char* path = std::getenv("FAKE_NVML_STATE");
  if (!path) return;
  struct stat st {};
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;  // a folder reads as a missing file
  if (s.loaded && st.st_ino == s.ino && st.st_size == s.size && st.st_mtim.tv_sec == s.mtime.tv_sec &&
      st.st_mtim.tv_nsec == s.mtime.tv_nsec)
    return;
  std::ifstream in(path);
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return;
  HideMaskedDevices(doc);
  s.doc = std::move(doc);
  s.loaded = true;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime = st.st_mtim;
}

const json& Devices(State& s) {
  static const json empty = json::array();
  if (!s.doc.contains("devices")) return empty;
  return s.doc["devices"];
}

// NVML error code for a recorded refusal such as "ERR:NVMLError_NotSupported:Not Supported".
int ErrorFromString(const std::string& text) {
  if (text.find("GpuIsLost") != std::string::npos) return NVML_ERROR_GPU_IS_LOST;
  if (text.find("NoPermission") != std::string::npos) return NVML_ERROR_NO_PERMISSION;
  if (text.find("NotFound") != std::string::npos) return NVML_ERROR_NOT_FOUND;
  if (text.find("Unknown") != std::string::npos) return NVML_ERROR_UNKNOWN;
  return NVML_ERROR_NOT_SUPPORTED;
}

// Finds the device (or MIG device) JSON of a handle, and the error every call on it returns.
struct Lookup {
  const json* dev = nullptr;
  int rc = NVML_SUCCESS;
};

Lookup Find(State& s, nvmlDevice_t handle, const char* function) {
  Lookup out;
  if (!s.initialised) {
    out.rc = NVML_ERROR_UNINITIALIZED;
    return out;
  }
  auto* h = reinterpret_cast<Handle*>(handle);
  if (h < g_handles || h >= g_handles + kMaxDevices * (kMaxMig + 1)) {
    out.rc = NVML_ERROR_INVALID_ARGUMENT;
    return out;
  }
  const json& devices = Devices(s);
  if (h->device >= static_cast<int>(devices.size())) {
    out.rc = NVML_ERROR_GPU_IS_LOST;  // the device vanished from the state file
    return out;
  }
  const json& dev = devices[h->device];
  if (dev.contains("error")) {
    out.rc = dev["error"].get<int>();
    return out;
  }
  if (dev.contains("errors") && dev["errors"].contains(function)) {
    out.rc = dev["errors"][function].get<int>();
    return out;
  }
  if (h->mig >= 0) {
    if (!dev.contains("mig_devices") || h->mig >= static_cast<int>(dev["mig_devices"].size())) {
      out.rc = NVML_ERROR_INVALID_ARGUMENT;
      return out;
    }
    out.dev = &dev["mig_devices"][h->mig];
    return out;
  }
  out.dev = &dev;
  return out;
}

// Reads an unsigned field that may be recorded as an error string; rc is set accordingly.
int GetUint(const json& dev, const char* key, unsigned long long* value) {
  if (!dev.contains(key)) return NVML_ERROR_NOT_SUPPORTED;
  const json& v = dev[key];
  if (v.is_string()) return ErrorFromString(v.get<std::string>());
  if (!v.is_number()) return NVML_ERROR_NOT_SUPPORTED;
  *value = v.get<unsigned long long>();
  return NVML_SUCCESS;
}

template <typename T>
int GetField(nvmlDevice_t handle, const char* function, const char* key, T* out) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, handle, function);
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long v = 0;
  int rc = GetUint(*l.dev, key, &v);
  if (rc == NVML_SUCCESS) *out = static_cast<T>(v);
  return rc;
}

int CopyString(const std::string& text, char* buf, unsigned length) {
  if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

int GetString(nvmlDevice_t handle, const char* function, const char* key, char* buf, unsigned length) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, handle, function);
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!l.dev->contains(key)) return NVML_ERROR_NOT_SUPPORTED;
  const json& v = (*l.dev)[key];
  if (!v.is_string()) return NVML_ERROR_NOT_SUPPORTED;
  std::string text = v.get<std::string>();
  if (text.rfind("ERR:", 0) == 0) return ErrorFromString(text);
  return CopyString(text, buf, length);
}

int GetMemory(nvmlDevice_t handle, const char* function, unsigned long long* total, unsigned long long* free,
              unsigned long long* used, unsigned long long* reserved) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, handle, function);
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!l.dev->contains("memory")) return NVML_ERROR_NOT_SUPPORTED;
  const json& m = (*l.dev)["memory"];
  *total = m.value("total", 0ULL);
  *used = m.value("used", 0ULL);
  *reserved = m.value("reserved", 0ULL);
  *free = m.contains("free") ? m["free"].get<unsigned long long>() : *total - *used - *reserved;
  return NVML_SUCCESS;
}

// The process lists: `key` is "processes" (compute) or "graphics_processes".
template <typename Record>
int GetProcesses(nvmlDevice_t handle, const char* function, const char* key, unsigned* count, Record* records) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, handle, function);
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  const json empty = json::array();
  const json& procs = l.dev->contains(key) ? (*l.dev)[key] : empty;
  if (procs.is_string()) return ErrorFromString(procs.get<std::string>());
  unsigned n = static_cast<unsigned>(procs.size());
  if (*count < n || (n > 0 && !records)) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) {
    Record r{};
    r.pid = procs[i].value("pid", 0U);
    const json& mem = procs[i].contains("used_memory") ? procs[i]["used_memory"] : json();
    r.usedGpuMemory = mem.is_number() ? mem.get<unsigned long long>() : NVML_VALUE_NOT_AVAILABLE_ULL;
    if constexpr (sizeof(Record) == sizeof(nvmlProcessInfo_t)) {
      r.gpuInstanceId = 0xFFFFFFFFu;
      r.computeInstanceId = 0xFFFFFFFFu;
    }
    records[i] = r;
  }
  *count = n;
  return NVML_SUCCESS;
}

std::string BusIdOf(const json& dev) { return dev.value("pci_bus_id", std::string()); }

int GetPci(nvmlDevice_t handle, const char* function, std::string* bus_id) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, handle, function);
  if (l.rc != NVML_SUCCESS) return l.rc;
  *bus_id = BusIdOf(*l.dev);
  return bus_id->empty() ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

void FillPci(const std::string& bus_id, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus_id.c_str());
  // busIdLegacy: 4-digit domain.
  std::string legacy = bus_id.size() > 4 ? bus_id.substr(4) : bus_id;
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", legacy.c_str());
  std::sscanf(bus_id.c_str(), "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
}

// The MIG mode recorded either as [current, pending] or as the recorder's string "[0, 0]".
void MigMode(const json& dev, unsigned* current, unsigned* pending) {
  *current = *pending = 0;
  if (!dev.contains("mig")) return;
  const json& m = dev["mig"];
  if (m.is_array() && m.size() == 2) {
    *current = m[0].get<unsigned>();
    *pending = m[1].get<unsigned>();
  } else if (m.is_string()) {
    std::sscanf(m.get<std::string>().c_str(), "[%u, %u]", current, pending);
  }
}

}  // namespace

FAKE_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  if (!s.loaded) return NVML_ERROR_DRIVER_NOT_LOADED;
  if (s.doc.contains("init_error")) return s.doc["init_error"].get<int>();
  for (int d = 0; d < kMaxDevices; ++d) {
    g_handles[d] = {d, -1};
    for (int m = 0; m < kMaxMig; ++m) g_handles[kMaxDevices + d * kMaxMig + m] = {d, m};
  }
  s.initialised = true;
  ++s.init_count;
  // As libnvidia-ml does, the first nvmlInit of a process starts a thread of the library's own that
  // lives as long as the process, with the signal mask of the caller at that moment. A signal the
  // caller blocks only afterwards can be delivered to it, whose default action ends the process
  // (what the daemon's stop on SIGTERM once suffered on the H200: daemon.cc, Setup).
  static std::once_flag started;
  std::call_once(started, [] { std::thread([] { for (;;) pause(); }).detach(); });
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

// As NVML's ("Initialization and Cleanup"): each nvmlInit needs its nvmlShutdown.
FAKE_EXPORT nvmlReturn_t nvmlShutdown(void) {
  State& s = S();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (--s.init_count == 0) s.initialised = false;
  return NVML_SUCCESS;
}

FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) { return rc == NVML_SUCCESS ? "Success" : "Fake error"; }

FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned int length) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  return CopyString(s.doc.value("driver", std::string("0.0")), buf, length);
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* buf, unsigned int length) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  return CopyString(s.doc.value("nvml", std::string("0.0")), buf, length);
}

static nvmlReturn_t CudaDriverVersion(int* version) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  *version = s.doc.value("cuda_driver", 0);
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) { return CudaDriverVersion(version); }
#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) { return CudaDriverVersion(version); }
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  if (!s.initialised) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(std::min<std::size_t>(Devices(s).size(), kMaxDevices));
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return nvmlDeviceGetCount_v2(count); }

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  if (!s.initialised) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= Devices(s).size() || index >= kMaxDevices) return NVML_ERROR_INVALID_ARGUMENT;
  const json& dev = Devices(s)[index];
  if (dev.value("handle_error", 0) != 0) return dev["handle_error"].get<int>();
  *device = reinterpret_cast<nvmlDevice_t>(&g_handles[index]);
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* buf, unsigned int length) {
  return GetString(d, "nvmlDeviceGetUUID", "uuid", buf, length);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned int length) {
  return GetString(d, "nvmlDeviceGetName", "name", buf, length);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int* minor) {
  return GetField(d, "nvmlDeviceGetMinorNumber", "minor", minor);
}

#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  std::string bus;
  int rc = GetPci(d, "nvmlDeviceGetPciInfo_v3", &bus);
  if (rc == NVML_SUCCESS) FillPci(bus, pci);
  return rc;
}
#endif

static nvmlReturn_t LegacyPci(nvmlDevice_t d, nvmlPciInfoLegacy_t* pci) {
  std::string bus;
  int rc = GetPci(d, "nvmlDeviceGetPciInfo", &bus);
  if (rc != NVML_SUCCESS) return rc;
  nvmlPciInfo_t full;
  FillPci(bus, &full);
  std::memset(pci, 0, sizeof *pci);
  std::memcpy(pci->busId, full.busIdLegacy, sizeof pci->busId);
  pci->domain = full.domain;
  pci->bus = full.bus;
  pci->device = full.device;
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfoLegacy_t* pci) { return LegacyPci(d, pci); }
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfoLegacy_t* pci) { return LegacyPci(d, pci); }

#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* mem) {
  if (!mem) return NVML_ERROR_INVALID_ARGUMENT;
  if (mem->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  return GetMemory(d, "nvmlDeviceGetMemoryInfo_v2", &mem->total, &mem->free, &mem->used, &mem->reserved);
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* mem) {
  if (!mem) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long reserved = 0;
  int rc = GetMemory(d, "nvmlDeviceGetMemoryInfo", &mem->total, &mem->free, &mem->used, &reserved);
  mem->used += reserved;  // v1's used includes the driver's reservation
  return rc;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* util) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, d, "nvmlDeviceGetUtilizationRates");
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!l.dev->contains("util")) return NVML_ERROR_NOT_SUPPORTED;
  const json& u = (*l.dev)["util"];
  if (u.is_string()) return ErrorFromString(u.get<std::string>());
  util->gpu = u.value("gpu", 0U);
  util->memory = u.value("memory", 0U);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int* temp) {
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return GetField(d, "nvmlDeviceGetTemperature", "temp_c", temp);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  return GetField(d, "nvmlDeviceGetPowerUsage", "power_mw", mw);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int* mw) {
  return GetField(d, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_mw", mw);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, int* state) {
  return GetField(d, "nvmlDeviceGetPerformanceState", "pstate", state);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int* mode) {
  return GetField(d, "nvmlDeviceGetComputeMode", "compute_mode", mode);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int* mode) {
  return GetField(d, "nvmlDeviceGetPersistenceMode", "persistence", mode);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned int* pct) {
  return GetField(d, "nvmlDeviceGetFanSpeed", "fan", pct);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int* current, unsigned int* pending) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, d, "nvmlDeviceGetMigMode");
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!l.dev->contains("mig")) return NVML_ERROR_NOT_SUPPORTED;
  MigMode(*l.dev, current, pending);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int* count) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, d, "nvmlDeviceGetMaxMigDeviceCount");
  if (l.rc != NVML_SUCCESS) return l.rc;
  unsigned current = 0, pending = 0;
  MigMode(*l.dev, &current, &pending);
  *count = current == 1 ? kMaxMig : 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index, nvmlDevice_t* mig) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, d, "nvmlDeviceGetMigDeviceHandleByIndex");
  if (l.rc != NVML_SUCCESS) return l.rc;
  const json& migs = l.dev->contains("mig_devices") ? (*l.dev)["mig_devices"] : json::array();
  if (index >= kMaxMig) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= migs.size()) return NVML_ERROR_NOT_FOUND;
  int device = reinterpret_cast<Handle*>(d)->device;
  *mig = reinterpret_cast<nvmlDevice_t>(&g_handles[kMaxDevices + device * kMaxMig + static_cast<int>(index)]);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int* id) {
  return GetField(d, "nvmlDeviceGetGpuInstanceId", "gi", id);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int* id) {
  return GetField(d, "nvmlDeviceGetComputeInstanceId", "ci", id);
}

#if !defined(FAKE_NVML_WITHOUT_V3_PROCESSES) && !defined(FAKE_NVML_LEGACY)
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count,
                                                                 nvmlProcessInfo_t* infos) {
  return GetProcesses(d, "nvmlDeviceGetComputeRunningProcesses_v3", "processes", count, infos);
}
#endif
#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* count,
                                                                 nvmlProcessInfo_t* infos) {
  return GetProcesses(d, "nvmlDeviceGetComputeRunningProcesses_v2", "processes", count, infos);
}
#endif
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* count,
                                                              nvmlProcessInfo_v1_t* infos) {
  return GetProcesses(d, "nvmlDeviceGetComputeRunningProcesses", "processes", count, infos);
}

// Graphics processes: the same protocol and records as the compute calls, from "graphics_processes".
// The _v3 and _v2 symbols come and go with the compute ones (nvml.h versions them together).
#ifndef FAKE_NVML_WITHOUT_GRAPHICS_PROCESSES
#if !defined(FAKE_NVML_WITHOUT_V3_PROCESSES) && !defined(FAKE_NVML_LEGACY)
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int* count,
                                                                  nvmlProcessInfo_t* infos) {
  return GetProcesses(d, "nvmlDeviceGetGraphicsRunningProcesses_v3", "graphics_processes", count, infos);
}
#endif
#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int* count,
                                                                  nvmlProcessInfo_t* infos) {
  return GetProcesses(d, "nvmlDeviceGetGraphicsRunningProcesses_v2", "graphics_processes", count, infos);
}
#endif
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int* count,
                                                               nvmlProcessInfo_v1_t* infos) {
  return GetProcesses(d, "nvmlDeviceGetGraphicsRunningProcesses", "graphics_processes", count, infos);
}
#endif

// NVLinks: "nvlinks": {"<remote pci bus id>": <active link count>, ...}; links are numbered in that order.
static int NvLinkRemote(nvmlDevice_t d, const char* function, unsigned link, std::string* remote) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, d, function);
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!l.dev->contains("nvlinks")) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned next = 0;
  for (const auto& [bus, count] : (*l.dev)["nvlinks"].items()) {
    unsigned n = count.get<unsigned>();
    if (link < next + n) {
      *remote = bus;
      return NVML_SUCCESS;
    }
    next += n;
  }
  remote->clear();
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int* active) {
  std::string remote;
  int rc = NvLinkRemote(d, "nvmlDeviceGetNvLinkState", link, &remote);
  if (rc == NVML_SUCCESS) *active = remote.empty() ? 0 : NVML_FEATURE_ENABLED;
  return rc;
}

#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t* pci) {
  std::string remote;
  int rc = NvLinkRemote(d, "nvmlDeviceGetNvLinkRemotePciInfo_v2", link, &remote);
  if (rc != NVML_SUCCESS) return rc;
  if (remote.empty()) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(remote, pci);
  return NVML_SUCCESS;
}
#endif

// P2P over NVLink: OK when either GPU's "nvlinks" names the other, or both have links to the same
// remote that is not a GPU of the machine (an NVSwitch, or the placeholder bus ID some VMs report).
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps_index, int* status) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup la = Find(s, a, "nvmlDeviceGetP2PStatus"), lb = Find(s, b, "nvmlDeviceGetP2PStatus");
  if (la.rc != NVML_SUCCESS) return la.rc;
  if (lb.rc != NVML_SUCCESS) return lb.rc;
  if (!status) return NVML_ERROR_INVALID_ARGUMENT;
  if (caps_index != NVML_P2P_CAPS_INDEX_NVLINK) return NVML_ERROR_NOT_SUPPORTED;
  const json empty = json::object();
  const json& links_a = la.dev->contains("nvlinks") ? (*la.dev)["nvlinks"] : empty;
  const json& links_b = lb.dev->contains("nvlinks") ? (*lb.dev)["nvlinks"] : empty;
  auto is_gpu = [&](const std::string& bus) {
    for (const auto& d : Devices(s))
      if (BusIdOf(d) == bus) return true;
    return false;
  };
  bool ok = links_a.contains(BusIdOf(*lb.dev)) || links_b.contains(BusIdOf(*la.dev));
  for (const auto& [bus, count] : links_a.items())
    ok = ok || (!is_gpu(bus) && links_b.contains(bus));
  *status = ok ? NVML_P2P_STATUS_OK : 5;  // 5: NVML_P2P_STATUS_NOT_SUPPORTED
  return NVML_SUCCESS;
}

// Telemetry (the daemon's sampler): "energy_mj", "clock_sm" and "clock_mem" (as recorded),
// "throttle" (the clock event reason bits, as recorded), "ecc_uncorrected".
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  return GetField(d, "nvmlDeviceGetTotalEnergyConsumption", "energy_mj", mj);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int* mhz) {
  if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS) return GetField(d, "nvmlDeviceGetClockInfo", "clock_sm", mhz);
  if (type == NVML_CLOCK_MEM) return GetField(d, "nvmlDeviceGetClockInfo", "clock_mem", mhz);
  return NVML_ERROR_NOT_SUPPORTED;
}
// Drivers before 535 have only the older name.
#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* bits) {
  return GetField(d, "nvmlDeviceGetCurrentClocksEventReasons", "throttle", bits);
}
#endif
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long* bits) {
  return GetField(d, "nvmlDeviceGetCurrentClocksThrottleReasons", "throttle", bits);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int error_type, int counter_type,
                                                     unsigned long long* count) {
  if (error_type != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counter_type != NVML_VOLATILE_ECC)
    return NVML_ERROR_NOT_SUPPORTED;
  return GetField(d, "nvmlDeviceGetTotalEccErrors", "ecc_uncorrected", count);
}

// "process_util": [{"pid", "sm", "mem"}] percent; every sample is stamped now, so each call after
// the last seen time stamp answers them again (as a driver sampling all the time would).
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t* samples,
                                                         unsigned int* count, unsigned long long last_seen_us) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, d, "nvmlDeviceGetProcessUtilization");
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  if (!l.dev->contains("process_util")) return NVML_ERROR_NOT_SUPPORTED;
  const json& list = (*l.dev)["process_util"];
  if (list.is_string()) return ErrorFromString(list.get<std::string>());
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  unsigned long long stamp = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL + now.tv_nsec / 1000;
  if (stamp <= last_seen_us) stamp = last_seen_us + 1;
  const unsigned n = static_cast<unsigned>(list.size());
  if (n == 0) return NVML_ERROR_NOT_FOUND;
  if (!samples || *count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) {
    samples[i] = nvmlProcessUtilizationSample_t{};
    samples[i].pid = list[i].value("pid", 0U);
    samples[i].timeStamp = stamp;
    samples[i].smUtil = list[i].value("sm", 0U);
    samples[i].memUtil = list[i].value("mem", 0U);
  }
  *count = n;
  return NVML_SUCCESS;
}

// Xid events: a device with "xids": [79, ...] can be registered for them (others answer
// NOT_SUPPORTED); each listed Xid is delivered once, in order, to the event set (one set is enough
// for gpulane). Appending to the list while gpulane runs raises a new one.
namespace {
struct EventSet {
  bool registered[kMaxDevices] = {};
  std::size_t delivered[kMaxDevices] = {};
};
EventSet g_event_set;
bool g_event_set_made = false;
}  // namespace

FAKE_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  State& s = S();
  std::lock_guard lock(s.mu);
  if (!s.initialised) return NVML_ERROR_UNINITIALIZED;
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  g_event_set = EventSet{};
  g_event_set_made = true;
  *set = reinterpret_cast<nvmlEventSet_t>(&g_event_set);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  Lookup l = Find(s, d, "nvmlDeviceRegisterEvents");
  if (l.rc != NVML_SUCCESS) return l.rc;
  if (set != reinterpret_cast<nvmlEventSet_t>(&g_event_set) || !g_event_set_made) return NVML_ERROR_INVALID_ARGUMENT;
  if (!(types & nvmlEventTypeXidCriticalError) || !l.dev->contains("xids") || !(*l.dev)["xids"].is_array())
    return NVML_ERROR_NOT_SUPPORTED;
  const int device = reinterpret_cast<Handle*>(d)->device;
  g_event_set.registered[device] = true;
  g_event_set.delivered[device] = (*l.dev)["xids"].size();  // events from now on
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  (void)timeout_ms;  // answers at once: tests never wait on it
  State& s = S();
  std::lock_guard lock(s.mu);
  Refresh(s);
  if (set != reinterpret_cast<nvmlEventSet_t>(&g_event_set) || !data) return NVML_ERROR_INVALID_ARGUMENT;
  const json& devices = Devices(s);
  for (std::size_t i = 0; i < devices.size() && i < static_cast<std::size_t>(kMaxDevices); ++i) {
    if (!g_event_set.registered[i] || !devices[i].contains("xids")) continue;
    const json& xids = devices[i]["xids"];
    if (!xids.is_array() || g_event_set.delivered[i] >= xids.size()) continue;
    *data = nvmlEventData_t{};
    data->device = reinterpret_cast<nvmlDevice_t>(&g_handles[i]);
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = xids[g_event_set.delivered[i]++].get<unsigned long long>();
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (set != reinterpret_cast<nvmlEventSet_t>(&g_event_set)) return NVML_ERROR_INVALID_ARGUMENT;
  g_event_set_made = false;
  return NVML_SUCCESS;
}
