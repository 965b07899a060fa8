#pragma once
// The narrow interface through which everything but gpu/ sees GPUs; NvmlBackend is the real one,
// tests may substitute their own.
#include "gpu/types.h"
#include "util/result.h"

namespace gpulane {

/// Reads the state of every GPU. Implementations must be cheap to call repeatedly (watch mode,
/// waiting jobs): one-time costs like library loading belong in their construction.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  /// Reads all GPUs now. A GPU that fails is returned with `error` set rather than failing the call;
  /// the call fails only when nothing can be read (errors: kNvml).
  virtual Result<GpuSnapshot> Read() = 0;
};

}  // namespace gpulane
