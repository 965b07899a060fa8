#pragma once
// CUDA_VISIBLE_DEVICES, parsed exactly as CUDA does ("CUDA Environment Variables", CUDA C++
// Programming Guide): a comma-separated sequence of integer indices, "GPU-" UUIDs or unique UUID
// prefixes, and "MIG-" UUIDs; the first invalid entry (unknown, ambiguous, negative, repeated) ends
// the list; an empty value means no GPU at all; unset means every GPU.
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

/// The GPUs a request may use, as UUIDs in PCI order: those named by `gpu_list` (--gpus, strict;
/// "" = every GPU) that `cuda_visible_devices` (the caller's inherited value; nullopt = unset)
/// allows. Errors: kInvalidArgument naming the --gpus entry that names no GPU.
Result<std::vector<std::string>> ResolveAllowedGpus(const std::string& gpu_list,
                                                    const std::optional<std::string>& cuda_visible_devices,
                                                    const GpuSnapshot& snapshot);

/// Formats chosen GPUs for CUDA_VISIBLE_DEVICES: PCI-order indices ascending ("0,3"), or UUIDs.
std::string FormatVisibleDevices(const GpuSnapshot& snapshot, std::vector<unsigned> chosen, bool uuids);

}  // namespace gpulane
