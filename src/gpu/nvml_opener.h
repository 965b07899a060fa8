#pragma once
// The real GpuOpener (gpu/opener.h): a fresh NvmlBackend on each Open, NVML loaded then (never
// when the opener is built, so a command that reads no GPU pays nothing). Built only in
// os::SystemEnv, which an executable's main() builds.
#include "gpu/opener.h"
#include "util/clock.h"

namespace gpulane {

class NvmlOpener final : public GpuOpener {
 public:
  /// `clock` (os::Env's) times GPULANE_TIMING's "read all GPUs" line of the backends it opens.
  explicit NvmlOpener(const Clock& clock) : clock_(clock) {}
  /// NvmlBackend::Open with $GPULANE_NVML_LIBRARY or libnvidia-ml.so.1 (nvml::Library::Open).
  Result<std::unique_ptr<GpuBackend>> Open() override;

 private:
  const Clock& clock_;
};

}  // namespace gpulane
