#include "nvml/nvml_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fmt/format.h>

namespace gpulane::nvml {

namespace {

// Blocks every signal on the calling thread for its lifetime, then restores the mask.
class BlockAllSignals {
 public:
  BlockAllSignals() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~BlockAllSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockAllSignals(const BlockAllSignals&) = delete;
  BlockAllSignals& operator=(const BlockAllSignals&) = delete;

 private:
  sigset_t old_;
};

// Binds `slot` to the first of `symbols` the library exports; returns the name bound or "".
template <typename Fn>
std::string Bind(void* handle, Fn*& slot, std::initializer_list<const char*> symbols) {
  for (const char* symbol : symbols) {
    if (void* address = dlsym(handle, symbol)) {
      slot = reinterpret_cast<Fn*>(address);
      return symbol;
    }
  }
  return "";
}

}  // namespace

const char* ErrorName(nvmlReturn_t code) {
  switch (code) {
    case NVML_SUCCESS: return "NVML_SUCCESS";
    case NVML_ERROR_UNINITIALIZED: return "NVML_ERROR_UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT: return "NVML_ERROR_INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED: return "NVML_ERROR_NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION: return "NVML_ERROR_NO_PERMISSION";
    case NVML_ERROR_ALREADY_INITIALIZED: return "NVML_ERROR_ALREADY_INITIALIZED";
    case NVML_ERROR_NOT_FOUND: return "NVML_ERROR_NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case NVML_ERROR_INSUFFICIENT_POWER: return "NVML_ERROR_INSUFFICIENT_POWER";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT: return "NVML_ERROR_TIMEOUT";
    case NVML_ERROR_IRQ_ISSUE: return "NVML_ERROR_IRQ_ISSUE";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case NVML_ERROR_CORRUPTED_INFOROM: return "NVML_ERROR_CORRUPTED_INFOROM";
    case NVML_ERROR_GPU_IS_LOST: return "NVML_ERROR_GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED: return "NVML_ERROR_RESET_REQUIRED";
    case NVML_ERROR_OPERATING_SYSTEM: return "NVML_ERROR_OPERATING_SYSTEM";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case NVML_ERROR_IN_USE: return "NVML_ERROR_IN_USE";
    case NVML_ERROR_MEMORY: return "NVML_ERROR_MEMORY";
    case NVML_ERROR_NO_DATA: return "NVML_ERROR_NO_DATA";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "NVML_ERROR_INSUFFICIENT_RESOURCES";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case NVML_ERROR_DEPRECATED: return "NVML_ERROR_DEPRECATED";
    case NVML_ERROR_NOT_READY: return "NVML_ERROR_NOT_READY";
    case NVML_ERROR_GPU_NOT_FOUND: return "NVML_ERROR_GPU_NOT_FOUND";
    case NVML_ERROR_INVALID_STATE: return "NVML_ERROR_INVALID_STATE";
    case NVML_ERROR_UNKNOWN: return "NVML_ERROR_UNKNOWN";
    default: return "NVML_ERROR_UNRECOGNISED";
  }
}

std::string DescribeInitError(nvmlReturn_t code) {
  switch (code) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "NVIDIA driver is not loaded (nvmlInit: NVML_ERROR_DRIVER_NOT_LOADED): load the kernel module "
             "(modprobe nvidia) or check `dmesg | grep -i nvrm`";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "NVIDIA driver/library version mismatch (nvmlInit: NVML_ERROR_LIB_RM_VERSION_MISMATCH): the driver "
             "was upgraded without a reboot; reboot, or reload the nvidia kernel modules";
    case NVML_ERROR_NO_PERMISSION:
      return "no permission to open the NVIDIA devices (nvmlInit: NVML_ERROR_NO_PERMISSION): check the "
             "permissions of /dev/nvidia* or your membership of the group that owns them";
    default:
      return fmt::format("NVML could not be initialised (nvmlInit: {}, code {}): check the NVIDIA driver with "
                         "nvidia-smi",
                         ErrorName(code), code);
  }
}

Result<std::unique_ptr<Library>> Library::Open(const std::string& requested) {
  std::string path = requested;
  if (path.empty()) {
    const char* env = std::getenv(kLibraryEnv);
    path = (env && *env) ? env : kDefaultLibrary;
  }
  // Threads libnvidia-ml starts (when loaded, in nvmlInit) inherit this mask: every signal is
  // blocked in them, so that a signal gpulane takes later (SIGTERM through a signalfd, blocked on
  // its own threads only) is never delivered to one of the library's threads, where its default
  // action would end the process (the daemon's exit 143 on the H200; the fake NVML starts such a
  // thread in nvmlInit to keep it so in tests).
  const BlockAllSignals blocked;
  const auto t0 = std::chrono::steady_clock::now();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const auto t1 = std::chrono::steady_clock::now();
  if (!handle) {
    const char* why = dlerror();
    return MakeError(ErrorKind::kNoDriver,
                     fmt::format("NVIDIA driver not found: {} could not be loaded ({}); install the NVIDIA driver, "
                                 "or set {} to the library's path",
                                 path, why ? why : "unknown reason", kLibraryEnv));
  }
  std::unique_ptr<Library> lib(new Library());
  lib->handle_ = handle;
  lib->path_ = path;
#define GPULANE_NVML_BIND(member, type, need, ...)                                                    \
  {                                                                                                   \
    std::string bound = Bind(handle, lib->api_.member, {__VA_ARGS__});                                \
    if (bound.empty() && need == Need::kRequired)                                                     \
      return MakeError(ErrorKind::kNvml,                                                              \
                       fmt::format("{} lacks the required NVML function {} (function missing): the "  \
                                   "driver is too old or the file is not NVML; update the NVIDIA driver", \
                                   path, #member));                                                   \
    lib->bindings_.emplace_back(#member, bound);                                                      \
  }
  GPULANE_NVML_ENTRIES(GPULANE_NVML_BIND)
#undef GPULANE_NVML_BIND
  const auto t2 = std::chrono::steady_clock::now();
  nvmlReturn_t rc = lib->api_.Init();
  const auto t3 = std::chrono::steady_clock::now();
  if (rc != NVML_SUCCESS) return MakeError(ErrorKind::kNvml, DescribeInitError(rc));
  using Ms = std::chrono::duration<double, std::milli>;
  lib->dlopen_ms_ = Ms(t1 - t0).count();
  lib->resolve_ms_ = Ms(t2 - t1).count();
  lib->init_ms_ = Ms(t3 - t2).count();
  return lib;
}

}  // namespace gpulane::nvml
