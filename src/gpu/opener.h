#pragma once
// Where GPU backends come from (issue 25, item 3: the GPU snapshot source of os::Env). The
// executables' main() builds the real one (NvmlOpener, gpu/nvml_opener.h, inside os::SystemEnv);
// tests hand the same code one that returns backends over fixed snapshots. Nothing below cli/
// opens NVML by itself (scripts/check-seams.py).
#include <memory>

#include "gpu/backend.h"
#include "util/result.h"

namespace gpulane {

class GpuOpener {
 public:
  virtual ~GpuOpener() = default;
  /// A backend of its own for one reader (a backend's reads may keep state: NvmlBackend's Xid
  /// events), so each caller that reads on its own thread opens one. Errors: kNoDriver, kNvml.
  virtual Result<std::unique_ptr<GpuBackend>> Open() = 0;
};

}  // namespace gpulane
