#pragma once
// Device identity and order: NVML index, PCI bus order (CUDA's PCI_BUS_ID order) and /dev/nvidiaN
// minor numbers can all differ; gpulane keys GPUs by UUID and orders them by PCI bus ID.
#include <string>
#include <string_view>
#include <vector>

#include "gpu/types.h"

namespace gpulane {

/// Normalises a PCI bus ID to NVML's v3 form "DDDDDDDD:BB:DD.F" (8-digit domain, upper-case hex),
/// accepting the legacy 4-digit-domain form "0000:3b:00.0". Returns the input unchanged if unparsable.
std::string NormalizePciBusId(std::string_view bus_id);

/// Sorts devices by PCI bus ID and sets pci_index to each one's position.
void SortByPciBusId(std::vector<GpuDevice>& devices);

}  // namespace gpulane
