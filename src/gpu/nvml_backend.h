#pragma once
// GpuBackend over NVML: the only code outside nvml/ that calls NVML.
#include <memory>
#include <vector>

#include "gpu/backend.h"
#include "nvml/nvml_loader.h"
#include "util/clock.h"

namespace gpulane {

/// Reads GPUs through a loaded NVML (nvml::Library). Fields whose NVML call returns
/// NVML_ERROR_NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND or whose entry point is missing are left absent;
/// a call returning NVML_ERROR_GPU_IS_LOST (or another error that means the GPU itself failed)
/// marks that GPU failed and reading moves on to the next GPU.
class NvmlBackend : public GpuBackend {
 public:
  /// `clock` (os::Env's; it outlives the backend) times GPULANE_TIMING's "read all GPUs" line.
  NvmlBackend(std::unique_ptr<nvml::Library> library, const Clock& clock) : library_(std::move(library)), clock_(clock) {}
  ~NvmlBackend() override;

  /// Loads NVML (see nvml::Library::Open for errors: kNoDriver, kNvml) and wraps it. Outside gpu/
  /// only through os::Env's GpuOpener (gpu/nvml_opener.h), the fake NVML's tests and cli/.
  static Result<std::unique_ptr<NvmlBackend>> Open(const Clock& clock, const std::string& path = "");

  /// Reads every GPU. With options.telemetry it keeps state between reads: per-process
  /// utilisation is that since the previous read, and Xid errors those NVML reported since then
  /// (an NVML event set, made at the first such read): so one backend object serves one reader
  /// (the daemon's sampler has its own). Not thread-safe.
  Result<GpuSnapshot> Read(const ReadOptions& options) override;
  using GpuBackend::Read;

 private:
  /// Registers each GPU for Xid events once (nvmlDeviceRegisterEvents), then moves the events
  /// waiting in the set into devices[i].xid_errors (devices in NVML order, beside `handles`).
  void DrainXids(const std::vector<nvmlDevice_t>& handles, std::vector<GpuDevice>& devices);

  std::unique_ptr<nvml::Library> library_;
  const Clock& clock_;
  std::vector<unsigned long long> last_seen_us_;  ///< per NVML index: the newest process sample read
  enum class XidWatch { kNotYet, kWatched, kUnsupported };
  std::vector<XidWatch> xid_watch_;  ///< per NVML index
  nvmlEventSet_t xid_set_ = nullptr;
  bool xid_set_failed_ = false;
};

}  // namespace gpulane
