#include "gpu/gres_conf.h"

#include <cctype>

#include <fmt/format.h>

namespace gpulane {

Result<std::string> GresConfLines(const GpuSnapshot& snapshot) {
  if (snapshot.devices.empty()) return MakeError(ErrorKind::kNotEnoughGpus, "NVML lists no GPU: no gres.conf lines to write");
  std::string out = "# gres.conf lines for this node's GPUs, in PCI bus order, written by gpulane slurm gres-conf\n";
  for (const GpuDevice& d : snapshot.devices) {
    if (d.error)
      return MakeError(ErrorKind::kNvml, fmt::format("GPU {} ({}) failed ({}): fix it before writing gres.conf", d.pci_index,
                                                      d.pci_bus_id, *d.error));
    if (!d.minor_number)
      return MakeError(ErrorKind::kNvml, fmt::format("GPU {} ({}): NVML does not report its minor number, so its "
                                                      "/dev/nvidiaN is unknown: write its File= line by hand",
                                                      d.pci_index, d.pci_bus_id));
    if (!d.name || d.name->empty())
      return MakeError(ErrorKind::kNvml, fmt::format("GPU {} ({}): NVML does not report its name: give Type= by hand",
                                                      d.pci_index, d.pci_bus_id));
    std::string type;
    for (char c : *d.name) type += c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += fmt::format("# GPU {}: {} {}\nName=gpu Type={} File=/dev/nvidia{}\n", d.pci_index, d.pci_bus_id, d.uuid, type,
                       *d.minor_number);
  }
  return out;
}

}  // namespace gpulane
