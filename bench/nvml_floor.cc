// The floor of the daemon's sampler (issue 25, "Sampler footprint on a real GPU"): the NVML calls
// one sample makes, through gpulane's own loader (src/nvml/), once per interval in a plain loop and
// nothing else: no threads, no snapshot structures, no history, no lease directory.
// bench/sampler_floor.py runs it beside `gpulane daemon` sampling at the same interval.
//
//   gpulane_nvml_floor [INTERVAL_S=1] [SAMPLES=0: until SIGTERM/SIGINT]
//
// NVML as the daemon finds it: $GPULANE_NVML_LIBRARY (the fake NVML with $FAKE_NVML_STATE) or the
// driver's libnvidia-ml.so.1. Each call's result is kept in a volatile sink and otherwise unused.
//
// The calls of one sample, as NvmlBackend::Read(ReadOptions{.topology = false, .telemetry = true})
// makes them (src/gpu/nvml_backend.cc; daemon/sampler_thread.cc SampleOnce), on a GPU without MIG
// and with no process:
//   once:    nvmlSystemGetDriverVersion, nvmlSystemGetNVMLVersion, nvmlSystemGetCudaDriverVersion_v2,
//            nvmlDeviceGetCount_v2
//   per GPU: nvmlDeviceGetHandleByIndex_v2;
//            ReadIdentity: nvmlDeviceGetUUID, nvmlDeviceGetName, nvmlDeviceGetMinorNumber,
//              nvmlDeviceGetPciInfo_v3;
//            ReadMemory: nvmlDeviceGetMemoryInfo_v2;
//            ReadState: nvmlDeviceGetUtilizationRates, (ReadSensors) nvmlDeviceGetTemperature,
//              nvmlDeviceGetPowerUsage, nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetPerformanceState,
//              then nvmlDeviceGetComputeMode, nvmlDeviceGetPersistenceMode, nvmlDeviceGetMigMode;
//            ReadProcesses: nvmlDeviceGetComputeRunningProcesses_v3 and
//              nvmlDeviceGetGraphicsRunningProcesses_v3 (count query; records only when there are any);
//            ReadTelemetry: nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetClockInfo (SM, MEM),
//              nvmlDeviceGetCurrentClocksEventReasons, nvmlDeviceGetTotalEccErrors;
//            ReadProcessUtilization: nvmlDeviceGetProcessUtilization (count query since the newest
//              sample seen)
//   Xids:    nvmlEventSetCreate and nvmlDeviceRegisterEvents once; each sample nvmlEventSetWait_v2
//            (timeout 0) until it has nothing.
// Per GPU the loader's entry (newest symbol first) is called, as the backend does, falling back the
// same way when an entry is missing (PciInfo legacy, MemoryInfo v1, unversioned process lists).
#include <signal.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "nvml/nvml_loader.h"

namespace {

volatile sig_atomic_t g_stop = 0;
volatile unsigned long long g_sink = 0;

void OnSignal(int) { g_stop = 1; }

using gpulane::nvml::Api;

void Keep(unsigned long long v) { g_sink = g_sink + v; }

template <typename Record, typename Fn>
void ProcessList(Fn* fn, nvmlDevice_t h) {
  unsigned count = 0;
  nvmlReturn_t rc = fn(h, &count, nullptr);
  if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return Keep(rc);
  std::vector<Record> records(count + 16);
  count = static_cast<unsigned>(records.size());
  Keep(fn(h, &count, records.data()));
}

void Identity(const Api& api, nvmlDevice_t h) {
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (api.DeviceGetUUID) Keep(api.DeviceGetUUID(h, buf, sizeof buf));
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (api.DeviceGetName) Keep(api.DeviceGetName(h, name, sizeof name));
  unsigned minor = 0;
  if (api.DeviceGetMinorNumber) Keep(api.DeviceGetMinorNumber(h, &minor));
  if (api.DeviceGetPciInfoV3) {
    nvmlPciInfo_t pci{};
    Keep(api.DeviceGetPciInfoV3(h, &pci));
  } else if (api.DeviceGetPciInfoLegacy) {
    nvmlPciInfoLegacy_t pci{};
    Keep(api.DeviceGetPciInfoLegacy(h, &pci));
  }
  nvmlMemory_v2_t mem2{};
  mem2.version = nvmlMemory_v2;
  if (!api.DeviceGetMemoryInfoV2 || api.DeviceGetMemoryInfoV2(h, &mem2) != NVML_SUCCESS) {
    nvmlMemory_t mem{};
    if (api.DeviceGetMemoryInfo) Keep(api.DeviceGetMemoryInfo(h, &mem));
  }
}

void State(const Api& api, nvmlDevice_t h) {
  nvmlUtilization_t util{};
  if (api.DeviceGetUtilizationRates) Keep(api.DeviceGetUtilizationRates(h, &util));
  unsigned value = 0;
  int state = 0;
  if (api.DeviceGetTemperature) Keep(api.DeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &value));
  if (api.DeviceGetPowerUsage) Keep(api.DeviceGetPowerUsage(h, &value));
  if (api.DeviceGetEnforcedPowerLimit) Keep(api.DeviceGetEnforcedPowerLimit(h, &value));
  if (api.DeviceGetPerformanceState) Keep(api.DeviceGetPerformanceState(h, &state));
  if (api.DeviceGetComputeMode) Keep(api.DeviceGetComputeMode(h, &state));
  if (api.DeviceGetPersistenceMode) Keep(api.DeviceGetPersistenceMode(h, &state));
  unsigned current = 0, pending = 0;
  if (api.DeviceGetMigMode) Keep(api.DeviceGetMigMode(h, &current, &pending));
}

void Processes(const Api& api, nvmlDevice_t h) {
  if (api.DeviceGetComputeRunningProcesses) ProcessList<nvmlProcessInfo_t>(api.DeviceGetComputeRunningProcesses, h);
  else if (api.DeviceGetComputeRunningProcessesV1)
    ProcessList<nvmlProcessInfo_v1_t>(api.DeviceGetComputeRunningProcessesV1, h);
  if (api.DeviceGetGraphicsRunningProcesses) ProcessList<nvmlProcessInfo_t>(api.DeviceGetGraphicsRunningProcesses, h);
  else if (api.DeviceGetGraphicsRunningProcessesV1)
    ProcessList<nvmlProcessInfo_v1_t>(api.DeviceGetGraphicsRunningProcessesV1, h);
}

void Telemetry(const Api& api, nvmlDevice_t h, unsigned long long* last_seen_us) {
  unsigned long long big = 0;
  unsigned mhz = 0;
  if (api.DeviceGetTotalEnergyConsumption) Keep(api.DeviceGetTotalEnergyConsumption(h, &big));
  if (api.DeviceGetClockInfo) Keep(api.DeviceGetClockInfo(h, NVML_CLOCK_SM, &mhz));
  if (api.DeviceGetClockInfo) Keep(api.DeviceGetClockInfo(h, NVML_CLOCK_MEM, &mhz));
  if (api.DeviceGetCurrentClocksEventReasons) Keep(api.DeviceGetCurrentClocksEventReasons(h, &big));
  if (api.DeviceGetTotalEccErrors)
    Keep(api.DeviceGetTotalEccErrors(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &big));
  if (!api.DeviceGetProcessUtilization) return;
  unsigned count = 0;
  nvmlReturn_t rc = api.DeviceGetProcessUtilization(h, nullptr, &count, *last_seen_us);
  if (rc != NVML_ERROR_INSUFFICIENT_SIZE && !(rc == NVML_SUCCESS && count > 0)) return Keep(rc);
  std::vector<nvmlProcessUtilizationSample_t> samples(count + 16);
  count = static_cast<unsigned>(samples.size());
  if (api.DeviceGetProcessUtilization(h, samples.data(), &count, *last_seen_us) != NVML_SUCCESS) return;
  for (unsigned i = 0; i < count && i < samples.size(); ++i)
    if (samples[i].timeStamp > *last_seen_us) *last_seen_us = samples[i].timeStamp;
}

struct Floor {
  const Api& api;
  nvmlEventSet_t xids = nullptr;
  std::vector<bool> registered;
  std::vector<unsigned long long> last_seen_us;

  void Sample() {
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    int cuda = 0;
    if (api.SystemGetDriverVersion) Keep(api.SystemGetDriverVersion(buf, sizeof buf));
    if (api.SystemGetNVMLVersion) Keep(api.SystemGetNVMLVersion(buf, sizeof buf));
    if (api.SystemGetCudaDriverVersion) Keep(api.SystemGetCudaDriverVersion(&cuda));
    unsigned count = 0;
    if (api.DeviceGetCount(&count) != NVML_SUCCESS) return;
    if (last_seen_us.size() < count) last_seen_us.resize(count, 0), registered.resize(count, false);
    if (!xids && api.EventSetCreate) Keep(api.EventSetCreate(&xids));
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t h = nullptr;
      if (api.DeviceGetHandleByIndex(i, &h) != NVML_SUCCESS) continue;
      Identity(api, h);
      State(api, h);
      Processes(api, h);
      Telemetry(api, h, &last_seen_us[i]);
      if (xids && !registered[i] && api.DeviceRegisterEvents) {
        Keep(api.DeviceRegisterEvents(h, nvmlEventTypeXidCriticalError, xids));
        registered[i] = true;
      }
    }
    for (int n = 0; xids && api.EventSetWait && n < 1024; ++n) {
      nvmlEventData_t data{};
      if (api.EventSetWait(xids, &data, 0) != NVML_SUCCESS) break;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const double interval_s = argc > 1 ? std::atof(argv[1]) : 1.0;
  const long samples = argc > 2 ? std::atol(argv[2]) : 0;
  if (interval_s <= 0 || samples < 0) {
    std::fprintf(stderr, "usage: gpulane_nvml_floor [INTERVAL_S > 0] [SAMPLES >= 0, 0: until a signal]\n");
    return 2;
  }
  auto library = gpulane::nvml::Library::Open();
  if (!library) {
    std::fprintf(stderr, "gpulane_nvml_floor: %s\n", library.error().message.c_str());
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  Floor floor{(*library)->api(), nullptr, {}, {}};
  // Absolute deadlines on CLOCK_MONOTONIC, as the sampler's loop keeps its own (next += interval).
  timespec next{};
  clock_gettime(CLOCK_MONOTONIC, &next);
  const long step_ns = static_cast<long>(interval_s * 1e9);
  for (long n = 0; !g_stop && (samples == 0 || n < samples); ++n) {
    floor.Sample();
    next.tv_nsec += step_ns % 1000000000L;
    next.tv_sec += step_ns / 1000000000L + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    while (!g_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) != 0) {
    }
  }
  return 0;
}
