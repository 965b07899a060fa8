#include "gpu/ordering.h"

#include <algorithm>
#include <cctype>

#include "util/strings.h"

namespace gpulane {

std::string NormalizePciBusId(std::string_view bus_id) {
  std::string text(Trim(bus_id));
  auto colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) == std::string::npos) return text;
  std::string domain = text.substr(0, colon);
  if (domain.empty() || domain.size() > 8) return text;
  std::string out = std::string(8 - domain.size(), '0') + domain + text.substr(colon);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void SortByPciBusId(std::vector<GpuDevice>& devices) {
  std::stable_sort(devices.begin(), devices.end(),
                   [](const GpuDevice& a, const GpuDevice& b) {
                     // A GPU whose bus ID could not be read sorts last, in NVML order.
                     if (a.pci_bus_id.empty() != b.pci_bus_id.empty()) return b.pci_bus_id.empty();
                     return a.pci_bus_id < b.pci_bus_id;
                   });
  for (unsigned i = 0; i < devices.size(); ++i) devices[i].pci_index = i;
}

}  // namespace gpulane
