#pragma once
// CUDA_VISIBLE_DEVICES, parsed exactly as CUDA does ("CUDA Environment Variables", CUDA C++
// Programming Guide): a comma-separated sequence of integer indices, "GPU-" UUIDs or unique UUID
// prefixes, and "MIG-" UUIDs; the first invalid entry (unknown, ambiguous, negative, repeated) ends
// the list; an empty value means no GPU at all; unset means every GPU.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/types.h"
#include "util/result.h"

namespace gpulane {

/// The GPUs a process may use.
struct VisibleDevices {
  bool restricted = false;              ///< false: variable unset, every GPU is visible
  std::vector<unsigned> pci_indices;    ///< the visible GPUs in the list's order (MIG parents included)
  std::vector<std::string> mig_uuids;   ///< MIG devices named in the list
  std::optional<std::string> ended_by;  ///< why the list ended early: "entry 'x' ...", for a warning

  /// True if the GPU at `pci_index` may be used.
  bool Allows(unsigned pci_index) const;
};

/// Parses `value` (nullopt = unset) against the GPUs of `snapshot`. Integer indices are taken in
/// PCI bus order, as CUDA numbers GPUs with CUDA_DEVICE_ORDER=PCI_BUS_ID (gpulane always sets it;
/// with CUDA's default FASTEST_FIRST order they match whenever all GPUs are the same model).
VisibleDevices ParseCudaVisibleDevices(std::optional<std::string_view> value, const GpuSnapshot& snapshot);

/// The GPUs named by a `--gpus` list (same syntax as CUDA_VISIBLE_DEVICES), but strict: any entry
/// that does not name a GPU is an error (returned in `error`), not the silent end of the list.
VisibleDevices ParseGpuList(std::string_view value, const GpuSnapshot& snapshot, std::string* error);

/// The GPU allocation a process inherited from its environment: CUDA_VISIBLE_DEVICES and, on a
/// Slurm node inside a job, Slurm's list of the job's (or job step's) GPUs.
struct InheritedGpus {
  std::optional<std::string> cuda_visible_devices;  ///< nullopt: unset
  /// SLURM_STEP_GPUS, else SLURM_JOB_GPUS ("0,2", ranges "0-3" too): gres indices, which are the
  /// node's GPUs in the order of its gres.conf lines (PCI bus order with `gpulane slurm
  /// gres-conf`). Read only when SLURM_JOB_ID and SLURMD_NODENAME are set (a batch script or job
  /// step on the allocated node; an `salloc` shell on a login node has no SLURMD_NODENAME).
  std::optional<std::string> slurm_gpus;
  std::string slurm_variable;  ///< the variable slurm_gpus came from, for messages

  /// True inside a Slurm job that was given GPUs.
  bool in_slurm() const { return slurm_gpus.has_value(); }
};

/// Reads InheritedGpus through `env` (a variable's value, nullopt when unset).
InheritedGpus InheritedGpusFrom(const std::function<std::optional<std::string>(const char*)>& env);

/// The GPUs an inherited allocation allows. Outside Slurm: CUDA_VISIBLE_DEVICES as CUDA reads it.
/// Inside a Slurm job, never a GPU outside Slurm's list:
///  - NVML shows exactly as many GPUs as the job has, fewer than Slurm's indices need (the job's
///    cgroup hides the node's others): they are the allocation, and CUDA_VISIBLE_DEVICES indexes them.
///  - NVML shows the whole node and every GPU outside the list is unreadable (Slurm's
///    ConstrainDevices): CUDA sees only the allocation, so CUDA_VISIBLE_DEVICES's indices count
///    within it ("0" is the allocation's first GPU in PCI order), as Slurm numbers them then.
///  - otherwise CUDA_VISIBLE_DEVICES is read as usual (PCI order) and cut to Slurm's list.
/// A Slurm list that is not a list of indices of this node's GPUs allows no GPU; `ended_by` says why.
VisibleDevices ParseInheritedGpus(const InheritedGpus& inherited, const GpuSnapshot& snapshot);

/// The GPUs a request may use, as UUIDs in PCI order: those named by `gpu_list` (--gpus, strict;
/// "" = every GPU) that `inherited` (the caller's environment, ParseInheritedGpus) allows.
/// Errors: kInvalidArgument naming the --gpus entry that names no GPU.
Result<std::vector<std::string>> ResolveAllowedGpus(const std::string& gpu_list, const InheritedGpus& inherited,
                                                    const GpuSnapshot& snapshot);

/// Formats chosen GPUs for CUDA_VISIBLE_DEVICES: PCI-order indices ascending ("0,3"), or UUIDs.
std::string FormatVisibleDevices(const GpuSnapshot& snapshot, std::vector<unsigned> chosen, bool uuids);

}  // namespace gpulane
