#pragma once
// The subset of NVML's C API that gpulane uses, declared here because the build machines have no
// nvml.h. Layouts, constants and entry points follow NVIDIA's "NVML API Reference Guide"
// (docs.nvidia.com/deploy/nvml-api/), nvml.h of driver 450 and later; facts measured on driver
// 580.159.04 are in ../shared/notes/nvml-facts.md. Names are NVML's own so the ABI and the
// documentation map one to one.
//
// Every entry point gpulane may call is listed once, in GPULANE_NVML_ENTRIES below: the table the
// loader (nvml_loader.h) resolves with dlsym, trying each symbol of an entry in order, newest first.
// Entries whose layouts differ between versions are separate entries (e.g. the 24-byte process
// records of _v2/_v3 against the 16-byte ones of the unversioned call).
//
// The graphics-process calls (nvmlDeviceGetGraphicsRunningProcesses_v3, _v2, unversioned) share the
// compute calls' records and protocol. Seen on an H200 with driver 580.159.04 (2026-12-01): all
// three exported; NVML_SUCCESS with count 0 when idle and while a CUDA (PyTorch) process ran, which
// the compute calls alone listed; about 0.01-0.03 ms a call after the first.
#include <cstdint>
#include <type_traits>

extern "C" {

typedef int nvmlReturn_t;  // NOLINT: nvmlReturn_enum; values below
typedef struct nvmlDevice_st* nvmlDevice_t;

// nvmlReturn_t values ("Error reporting" in the reference).
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999,
};

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_TEMPERATURE_GPU 0
#define NVML_FEATURE_ENABLED 1
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL

// nvmlClockType_t ("Device Enums"): which clock nvmlDeviceGetClockInfo reads, MHz.
enum : int {
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_CLOCK_VIDEO = 3,
};

// nvmlClocksEventReasons ("NvmlClocksEventReasons"; before driver 535 the same bits were named
// nvmlClocksThrottleReason*): why the clocks are below their maximum, a bit mask.
#define nvmlClocksEventReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x0000000000000100ULL

// nvmlMemoryErrorType_t and nvmlEccCounterType_t ("Device Enums"), for nvmlDeviceGetTotalEccErrors.
enum : int {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
};
enum : int {
  NVML_VOLATILE_ECC = 0,   // since the last driver load
  NVML_AGGREGATE_ECC = 1,  // over the GPU's life
};

// nvmlEventType ("Event Types"): the bit of nvmlDeviceRegisterEvents for Xid errors; the event's
// eventData is the Xid.
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
typedef struct nvmlEventSet_st* nvmlEventSet_t;

// nvmlComputeMode_t ("Device Enums").
enum : int {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,  // deprecated
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

// nvmlGpuP2PCapsIndex_t / nvmlGpuP2PStatus_t ("Topology queries"): can two GPUs talk over NVLink.
enum : int {
  NVML_P2P_CAPS_INDEX_NVLINK = 2,
  NVML_P2P_STATUS_OK = 0,
};

// nvmlGpuTopologyLevel_t ("Topology queries"): how two GPUs are connected through PCIe.
enum : int {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};

/// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2 fill it.
typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:3B:00.0"
} nvmlPciInfo_t;

/// The older layout that nvmlDeviceGetPciInfo_v2 and nvmlDeviceGetPciInfo fill.
typedef struct nvmlPciInfoLegacy_st {
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];  // "0000:3B:00.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfoLegacy_t;

/// nvmlMemory_t (v1): `used` includes memory reserved by the driver.
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

/// nvmlMemory_v2_t: `used` excludes `reserved`; `version` must be nvmlMemory_v2 (below).
typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct nvmlUtilization_st {
  unsigned int gpu;     // percent of time a kernel ran over the last sample period
  unsigned int memory;  // percent of time device memory was read or written
} nvmlUtilization_t;

/// Process record filled by nvmlDeviceGet{Compute,Graphics}RunningProcesses_v3 and _v2 (24 bytes).
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE_ULL when unknown
  unsigned int gpuInstanceId;        // 0xFFFFFFFF when not on a MIG device
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/// Process record filled by the unversioned nvmlDeviceGet{Compute,Graphics}RunningProcesses (16 bytes).
typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/// nvmlProcessUtilizationSample_t: one process's utilisation in the driver's last sample period
/// ("Device Queries", nvmlDeviceGetProcessUtilization); timeStamp is CPU time in microseconds.
typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;   // percent
  unsigned int memUtil;  // percent
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/// nvmlEventData_t as nvmlEventSetWait_v2 fills it ("Event Handling Methods").
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // for nvmlEventTypeXidCriticalError: the Xid
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

}  // extern "C"

static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t is 32 bytes");
static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t is 32 bytes");
static_assert(sizeof(nvmlProcessInfo_t) == 24, "NVML _v2/_v3 process records are 24 bytes");
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "NVML v1 process records are 16 bytes");
static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t is 40 bytes");

namespace gpulane::nvml {

enum class Need { kRequired, kOptional };

// X(member, function type, need, symbol names newest first...)
#define GPULANE_NVML_ENTRIES(X)                                                                                 \
  X(Init, nvmlReturn_t(void), Need::kRequired, "nvmlInit_v2", "nvmlInit")                                      \
  X(Shutdown, nvmlReturn_t(void), Need::kOptional, "nvmlShutdown")                                             \
  X(ErrorString, const char*(nvmlReturn_t), Need::kOptional, "nvmlErrorString")                                \
  X(SystemGetDriverVersion, nvmlReturn_t(char*, unsigned int), Need::kOptional, "nvmlSystemGetDriverVersion")  \
  X(SystemGetNVMLVersion, nvmlReturn_t(char*, unsigned int), Need::kOptional, "nvmlSystemGetNVMLVersion")      \
  X(SystemGetCudaDriverVersion, nvmlReturn_t(int*), Need::kOptional, "nvmlSystemGetCudaDriverVersion_v2",      \
    "nvmlSystemGetCudaDriverVersion")                                                                          \
  X(DeviceGetCount, nvmlReturn_t(unsigned int*), Need::kRequired, "nvmlDeviceGetCount_v2",                     \
    "nvmlDeviceGetCount")                                                                                      \
  X(DeviceGetHandleByIndex, nvmlReturn_t(unsigned int, nvmlDevice_t*), Need::kRequired,                        \
    "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex")                                             \
  X(DeviceGetUUID, nvmlReturn_t(nvmlDevice_t, char*, unsigned int), Need::kOptional, "nvmlDeviceGetUUID")      \
  X(DeviceGetName, nvmlReturn_t(nvmlDevice_t, char*, unsigned int), Need::kOptional, "nvmlDeviceGetName")      \
  X(DeviceGetMinorNumber, nvmlReturn_t(nvmlDevice_t, unsigned int*), Need::kOptional,                          \
    "nvmlDeviceGetMinorNumber")                                                                                \
  X(DeviceGetPciInfoV3, nvmlReturn_t(nvmlDevice_t, nvmlPciInfo_t*), Need::kOptional,                           \
    "nvmlDeviceGetPciInfo_v3")                                                                                 \
  X(DeviceGetPciInfoLegacy, nvmlReturn_t(nvmlDevice_t, nvmlPciInfoLegacy_t*), Need::kOptional,                 \
    "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo")                                                         \
  X(DeviceGetMemoryInfoV2, nvmlReturn_t(nvmlDevice_t, nvmlMemory_v2_t*), Need::kOptional,                      \
    "nvmlDeviceGetMemoryInfo_v2")                                                                              \
  X(DeviceGetMemoryInfo, nvmlReturn_t(nvmlDevice_t, nvmlMemory_t*), Need::kOptional,                           \
    "nvmlDeviceGetMemoryInfo")                                                                                 \
  X(DeviceGetUtilizationRates, nvmlReturn_t(nvmlDevice_t, nvmlUtilization_t*), Need::kOptional,                \
    "nvmlDeviceGetUtilizationRates")                                                                           \
  X(DeviceGetTemperature, nvmlReturn_t(nvmlDevice_t, int, unsigned int*), Need::kOptional,                     \
    "nvmlDeviceGetTemperature")                                                                                \
  X(DeviceGetPowerUsage, nvmlReturn_t(nvmlDevice_t, unsigned int*), Need::kOptional,                           \
    "nvmlDeviceGetPowerUsage")                                                                                 \
  X(DeviceGetEnforcedPowerLimit, nvmlReturn_t(nvmlDevice_t, unsigned int*), Need::kOptional,                   \
    "nvmlDeviceGetEnforcedPowerLimit")                                                                         \
  X(DeviceGetPerformanceState, nvmlReturn_t(nvmlDevice_t, int*), Need::kOptional,                              \
    "nvmlDeviceGetPerformanceState")                                                                           \
  X(DeviceGetComputeMode, nvmlReturn_t(nvmlDevice_t, int*), Need::kOptional, "nvmlDeviceGetComputeMode")       \
  X(DeviceGetPersistenceMode, nvmlReturn_t(nvmlDevice_t, int*), Need::kOptional,                               \
    "nvmlDeviceGetPersistenceMode")                                                                            \
  X(DeviceGetMigMode, nvmlReturn_t(nvmlDevice_t, unsigned int*, unsigned int*), Need::kOptional,               \
    "nvmlDeviceGetMigMode")                                                                                    \
  X(DeviceGetMaxMigDeviceCount, nvmlReturn_t(nvmlDevice_t, unsigned int*), Need::kOptional,                    \
    "nvmlDeviceGetMaxMigDeviceCount")                                                                          \
  X(DeviceGetMigDeviceHandleByIndex, nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlDevice_t*), Need::kOptional, \
    "nvmlDeviceGetMigDeviceHandleByIndex")                                                                     \
  X(DeviceGetGpuInstanceId, nvmlReturn_t(nvmlDevice_t, unsigned int*), Need::kOptional,                        \
    "nvmlDeviceGetGpuInstanceId")                                                                              \
  X(DeviceGetComputeInstanceId, nvmlReturn_t(nvmlDevice_t, unsigned int*), Need::kOptional,                    \
    "nvmlDeviceGetComputeInstanceId")                                                                          \
  X(DeviceGetComputeRunningProcesses, nvmlReturn_t(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*),           \
    Need::kOptional, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")     \
  X(DeviceGetComputeRunningProcessesV1, nvmlReturn_t(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*),      \
    Need::kOptional, "nvmlDeviceGetComputeRunningProcesses")                                                   \
  X(DeviceGetGraphicsRunningProcesses, nvmlReturn_t(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*),          \
    Need::kOptional, "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2")   \
  X(DeviceGetGraphicsRunningProcessesV1, nvmlReturn_t(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*),     \
    Need::kOptional, "nvmlDeviceGetGraphicsRunningProcesses")                                                  \
  X(DeviceGetNvLinkState, nvmlReturn_t(nvmlDevice_t, unsigned int, int*), Need::kOptional,                     \
    "nvmlDeviceGetNvLinkState")                                                                                \
  X(DeviceGetNvLinkRemotePciInfo, nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlPciInfo_t*), Need::kOptional,   \
    "nvmlDeviceGetNvLinkRemotePciInfo_v2")                                                                     \
  X(DeviceGetTopologyCommonAncestor, nvmlReturn_t(nvmlDevice_t, nvmlDevice_t, int*), Need::kOptional,          \
    "nvmlDeviceGetTopologyCommonAncestor")                                                                     \
  X(DeviceGetP2PStatus, nvmlReturn_t(nvmlDevice_t, nvmlDevice_t, int, int*), Need::kOptional,                  \
    "nvmlDeviceGetP2PStatus")                                                                                  \
  X(DeviceGetTotalEnergyConsumption, nvmlReturn_t(nvmlDevice_t, unsigned long long*), Need::kOptional,         \
    "nvmlDeviceGetTotalEnergyConsumption")                                                                     \
  X(DeviceGetClockInfo, nvmlReturn_t(nvmlDevice_t, int, unsigned int*), Need::kOptional,                       \
    "nvmlDeviceGetClockInfo")                                                                                  \
  X(DeviceGetCurrentClocksEventReasons, nvmlReturn_t(nvmlDevice_t, unsigned long long*), Need::kOptional,      \
    "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")                    \
  X(DeviceGetTotalEccErrors, nvmlReturn_t(nvmlDevice_t, int, int, unsigned long long*), Need::kOptional,       \
    "nvmlDeviceGetTotalEccErrors")                                                                             \
  X(DeviceGetProcessUtilization,                                                                               \
    nvmlReturn_t(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*, unsigned long long),            \
    Need::kOptional, "nvmlDeviceGetProcessUtilization")                                                        \
  X(EventSetCreate, nvmlReturn_t(nvmlEventSet_t*), Need::kOptional, "nvmlEventSetCreate")                      \
  X(DeviceRegisterEvents, nvmlReturn_t(nvmlDevice_t, unsigned long long, nvmlEventSet_t), Need::kOptional,     \
    "nvmlDeviceRegisterEvents")                                                                                \
  X(EventSetWait, nvmlReturn_t(nvmlEventSet_t, nvmlEventData_t*, unsigned int), Need::kOptional,               \
    "nvmlEventSetWait_v2")                                                                                     \
  X(EventSetFree, nvmlReturn_t(nvmlEventSet_t), Need::kOptional, "nvmlEventSetFree")

/// One pointer per entry of GPULANE_NVML_ENTRIES; nullptr where no symbol of the entry was found.
struct Api {
#define GPULANE_NVML_MEMBER(member, type, need, ...) std::add_pointer_t<type> member = nullptr;
  GPULANE_NVML_ENTRIES(GPULANE_NVML_MEMBER)
#undef GPULANE_NVML_MEMBER
};

/// "NVML_ERROR_GPU_IS_LOST" for 15, "NVML_ERROR_<code>" for codes this table lacks.
const char* ErrorName(nvmlReturn_t code);

}  // namespace gpulane::nvml
