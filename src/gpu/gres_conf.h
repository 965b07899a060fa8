#pragma once
// Slurm's gres.conf lines for this node's GPUs (issue 12, item 4: `gpulane slurm gres-conf`).
#include <string>

#include "gpu/types.h"
#include "util/result.h"

namespace gpulane {

/// One `Name=gpu Type=<model> File=/dev/nvidia<minor>` line per GPU, in PCI bus order (the order
/// CUDA_DEVICE_ORDER=PCI_BUS_ID and gpulane number GPUs; Slurm's SLURM_JOB_GPUS indices follow the
/// lines' order), preceded by comment lines naming each GPU's PCI bus ID and UUID. The type is
/// the NVML name in lower case with spaces as underscores ("NVIDIA H200" -> "nvidia_h200"), as
/// Slurm's own NVML autodetection names it. The minor number (nvmlDeviceGetMinorNumber) gives
/// File=: NVML index, minor number and PCI order can all differ. Errors: kNvml naming the GPU when
/// its minor number or name is unknown (a guessed File= would hand jobs the wrong device), or when
/// a GPU failed; kNotEnoughGpus when there is no GPU.
Result<std::string> GresConfLines(const GpuSnapshot& snapshot);

}  // namespace gpulane
