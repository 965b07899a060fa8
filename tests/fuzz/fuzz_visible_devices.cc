// CUDA_VISIBLE_DEVICES and --gpus lists (gpu/visible_devices.h) against a fixed snapshot of four
// GPUs: two whose UUIDs share a prefix, one with two MIG devices. Input: "<gpu_list>\n<inherited
// CUDA_VISIBLE_DEVICES>" (no newline: the list alone, the variable unset).
// Properties: the GPUs found are valid indices, each once; a list formatted by
// FormatVisibleDevices reads back as the same GPUs; a strict --gpus list either names GPUs or says
// which entry did not; ResolveAllowedGpus gives UUIDs of GPUs that both lists allow, in PCI order.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_check.h"
#include "gpu/visible_devices.h"

using namespace gpulane;

namespace {

GpuSnapshot MakeSnapshot() {
  GpuSnapshot snap;
  const char* uuids[] = {"GPU-4ba7fd4e-1c2b-4c1e-9a8b-000000000000", "GPU-4ba7fd4e-1c2b-4c1e-9a8b-111111111111",
                         "GPU-9f00aa11-2233-4455-6677-8899aabbccdd", "GPU-00c0ffee-0000-4000-8000-000000000003"};
  for (unsigned i = 0; i < 4; ++i) {
    GpuDevice d;
    d.nvml_index = 3 - i;
    d.pci_index = i;
    d.uuid = uuids[i];
    d.pci_bus_id = "00000000:0" + std::to_string(i + 1) + ":00.0";
    snap.devices.push_back(d);
  }
  snap.devices[2].mig_enabled = true;
  snap.devices[2].mig_devices = {MigDevice{"MIG-0a1b2c3d-0000-5000-8000-000000000001", 1, 0, {}, {}},
                                 MigDevice{"MIG-0a1b2c3d-0000-5000-8000-000000000002", 2, 0, {}, {}}};
  return snap;
}

void CheckIndices(const VisibleDevices& v, std::size_t gpus) {
  std::set<unsigned> seen;
  for (unsigned i : v.pci_indices) {
    FUZZ_CHECK(i < gpus, "GPU %u of %zu", i, gpus);
    FUZZ_CHECK(seen.insert(i).second, "GPU %u twice", i);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const GpuSnapshot snap = MakeSnapshot();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto nl = input.find('\n');
  const std::string list = input.substr(0, nl);
  const std::optional<std::string> inherited =
      nl == std::string::npos ? std::nullopt : std::optional<std::string>(input.substr(nl + 1));

  VisibleDevices visible = ParseCudaVisibleDevices(std::optional<std::string_view>(list), snap);
  FUZZ_CHECK(visible.restricted, "a set variable restricts");
  CheckIndices(visible, snap.devices.size());
  for (unsigned uuids = 0; uuids < 2; ++uuids) {
    const std::string formatted = FormatVisibleDevices(snap, visible.pci_indices, uuids);
    VisibleDevices again = ParseCudaVisibleDevices(std::optional<std::string_view>(formatted), snap);
    std::vector<unsigned> a = visible.pci_indices, b = again.pci_indices;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    FUZZ_CHECK(a == b && !again.ended_by, "'%s' formatted as '%s' does not read back", list.c_str(), formatted.c_str());
  }

  std::string error;
  VisibleDevices strict = ParseGpuList(list, snap, &error);
  CheckIndices(strict, snap.devices.size());
  if (error.empty()) {
    // Strict and lenient agree on a list without a bad entry.
    FUZZ_CHECK(!visible.ended_by && strict.pci_indices == visible.pci_indices, "'%s': strict and lenient differ",
               list.c_str());
  }

  auto allowed = ResolveAllowedGpus(list, inherited, snap);
  if (allowed) {
    FUZZ_CHECK(error.empty(), "'%s' resolved although the strict list failed: %s", list.c_str(), error.c_str());
    VisibleDevices inherited_v = ParseCudaVisibleDevices(
        inherited ? std::optional<std::string_view>(*inherited) : std::nullopt, snap);
    unsigned last = 0;
    bool first = true;
    for (const std::string& uuid : *allowed) {
      auto it = std::find_if(snap.devices.begin(), snap.devices.end(), [&](const GpuDevice& d) { return d.uuid == uuid; });
      FUZZ_CHECK(it != snap.devices.end(), "unknown UUID %s", uuid.c_str());
      FUZZ_CHECK(inherited_v.Allows(it->pci_index), "GPU %u is not visible", it->pci_index);
      FUZZ_CHECK(list.empty() || strict.Allows(it->pci_index),
                 "GPU %u is not listed", it->pci_index);
      FUZZ_CHECK(first || it->pci_index > last, "not in PCI order");
      last = it->pci_index;
      first = false;
    }
  } else {
    FUZZ_CHECK(!error.empty(), "'%s' refused although the strict list is fine", list.c_str());
  }
  return 0;
}
