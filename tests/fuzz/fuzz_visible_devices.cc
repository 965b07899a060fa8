// CUDA_VISIBLE_DEVICES and --gpus lists (gpu/visible_devices.h) against a fixed snapshot of four
// GPUs: two whose UUIDs share a prefix, one with two MIG devices. Input: "<gpu_list>\n<inherited
// CUDA_VISIBLE_DEVICES>[\n<Slurm's GPU list>]" (no newline: the list alone, the variable unset).
// Properties: the GPUs found are valid indices, each once; a list formatted by
// FormatVisibleDevices reads back as the same GPUs; a strict --gpus list either names GPUs or says
// which entry did not; ResolveAllowedGpus gives UUIDs of GPUs that both lists allow, in PCI order,
// and never a GPU outside a Slurm job's list.
#include <algorithm>
#include <cctype>
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

// The indices a Slurm list names ("0,2-3"), read independently of the code under test; nullopt
// when an entry is not a number or a range.
std::optional<std::set<unsigned>> SlurmIndices(const std::string& list) {
  std::set<unsigned> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string entry = list.substr(start, end - start);
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.front()))) entry.erase(0, 1);
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.back()))) entry.pop_back();
    const std::size_t dash = entry.find('-');
    const std::string a = entry.substr(0, dash);
    const std::string b = dash == std::string::npos ? a : entry.substr(dash + 1);
    if (!entry.empty()) {
      if (a.empty() || b.empty() || a.size() > 19 || b.size() > 19 ||
          a.find_first_not_of("0123456789") != std::string::npos || b.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      const unsigned long long first = std::stoull(a), last = std::stoull(b);
      if (last < first || last > 100000) return std::nullopt;  // the code under test refuses these too (beyond 1024)
      for (unsigned long long i = first; i <= last; ++i) out.insert(static_cast<unsigned>(i));
    }
    start = end + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const GpuSnapshot snap = MakeSnapshot();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto nl = input.find('\n');
  const std::string list = input.substr(0, nl);
  InheritedGpus inherited;
  if (nl != std::string::npos) {
    const std::string rest = input.substr(nl + 1);
    const auto nl2 = rest.find('\n');
    inherited.cuda_visible_devices = rest.substr(0, nl2);
    if (nl2 != std::string::npos) {
      inherited.slurm_gpus = rest.substr(nl2 + 1);
      inherited.slurm_variable = "SLURM_JOB_GPUS";
    }
  }

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
    VisibleDevices inherited_v = ParseInheritedGpus(inherited, snap);
    const auto slurm = inherited.slurm_gpus ? SlurmIndices(*inherited.slurm_gpus) : std::nullopt;
    // NVML showing exactly the job's GPUs while Slurm's indices go beyond them: the cgroup hides the
    // node's others, and the GPUs shown are the job's (ParseInheritedGpus).
    const bool hidden = slurm && !slurm->empty() && *slurm->rbegin() >= snap.devices.size() &&
                        slurm->size() == snap.devices.size();
    unsigned last = 0;
    bool first = true;
    for (const std::string& uuid : *allowed) {
      auto it = std::find_if(snap.devices.begin(), snap.devices.end(), [&](const GpuDevice& d) { return d.uuid == uuid; });
      FUZZ_CHECK(it != snap.devices.end(), "unknown UUID %s", uuid.c_str());
      FUZZ_CHECK(inherited_v.Allows(it->pci_index), "GPU %u is not visible", it->pci_index);
      FUZZ_CHECK(!inherited.slurm_gpus || hidden || (slurm && slurm->count(it->pci_index)), "GPU %u is outside Slurm's list",
                 it->pci_index);
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
