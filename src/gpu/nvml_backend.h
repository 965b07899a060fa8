#pragma once
// GpuBackend over NVML: the only code outside nvml/ that calls NVML.
#include <memory>

#include "gpu/backend.h"
#include "nvml/nvml_loader.h"

namespace gpulane {

/// Reads GPUs through a loaded NVML (nvml::Library). Fields whose NVML call returns
/// NVML_ERROR_NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND or whose entry point is missing are left absent;
/// a call returning NVML_ERROR_GPU_IS_LOST (or another error that means the GPU itself failed)
/// marks that GPU failed and reading moves on to the next GPU.
class NvmlBackend : public GpuBackend {
 public:
  explicit NvmlBackend(std::unique_ptr<nvml::Library> library) : library_(std::move(library)) {}

  /// Loads NVML (see nvml::Library::Open for errors: kNoDriver, kNvml) and wraps it.
  static Result<std::unique_ptr<NvmlBackend>> Open(const std::string& path = "");

  Result<GpuSnapshot> Read(const ReadOptions& options) override;
  using GpuBackend::Read;

 private:
  std::unique_ptr<nvml::Library> library_;
};

}  // namespace gpulane
