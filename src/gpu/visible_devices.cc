#include "gpu/visible_devices.h"

#include <algorithm>
#include <fmt/format.h>

#include "util/strings.h"

namespace gpulane {
namespace {

// Resolves one entry to a GPU (pci index) and, for MIG entries, the MIG UUID. Returns a reason on failure.
std::optional<std::string> Resolve(std::string_view entry, const GpuSnapshot& snap, unsigned* pci_index,
                                   std::optional<std::string>* mig_uuid) {
  unsigned long long number = 0;
  if (ParseUint(entry, &number)) {
    if (number >= snap.devices.size())
      return fmt::format("index {} is out of range (there are {} GPUs)", number, snap.devices.size());
    *pci_index = static_cast<unsigned>(number);
    return std::nullopt;
  }
  if (StartsWithNoCase(entry, "MIG-")) {
    // "MIG-<uuid>" (R470+) or the older "MIG-GPU-<uuid>/<gi>/<ci>".
    std::string_view rest = entry.substr(4);
    if (StartsWithNoCase(rest, "GPU-")) {
      std::string_view gpu = rest.substr(0, rest.find('/'));
      for (const auto& d : snap.devices) {
        if (ToLower(d.uuid) == ToLower(gpu)) {
          *pci_index = d.pci_index;
          *mig_uuid = std::string(entry);
          return std::nullopt;
        }
      }
      return fmt::format("no GPU has the UUID {}", gpu);
    }
    int matches = 0;
    for (const auto& d : snap.devices) {
      for (const auto& m : d.mig_devices) {
        if (StartsWithNoCase(m.uuid, entry)) {
          ++matches;
          *pci_index = d.pci_index;
          *mig_uuid = m.uuid;
        }
      }
    }
    if (matches == 1) return std::nullopt;
    return matches == 0 ? fmt::format("no MIG device has the UUID {}", entry)
                        : fmt::format("{} is an ambiguous MIG UUID prefix", entry);
  }
  if (StartsWithNoCase(entry, "GPU-") && entry.size() > 4) {
    int matches = 0;
    for (const auto& d : snap.devices) {
      if (StartsWithNoCase(d.uuid, entry)) {
        ++matches;
        *pci_index = d.pci_index;
      }
    }
    if (matches == 1) return std::nullopt;
    return matches == 0 ? fmt::format("no GPU has a UUID starting {}", entry)
                        : fmt::format("{} matches {} GPUs' UUIDs", entry, matches);
  }
  return fmt::format("'{}' is neither an index nor a GPU-/MIG- UUID", entry);
}

// Walks the list; `strict` turns the first bad entry into an error instead of the end of the list.
VisibleDevices Walk(std::string_view value, const GpuSnapshot& snap, bool strict, std::string* error) {
  VisibleDevices out;
  out.restricted = true;
  if (Trim(value).empty()) return out;
  for (const std::string& raw : Split(value, ',')) {
    std::string_view entry = Trim(raw);
    unsigned pci_index = 0;
    std::optional<std::string> mig;
    std::optional<std::string> why = Resolve(entry, snap, &pci_index, &mig);
    bool repeated = !why && !mig &&
                    std::find(out.pci_indices.begin(), out.pci_indices.end(), pci_index) != out.pci_indices.end();
    if (repeated) why = fmt::format("GPU {} is listed twice", pci_index);
    if (why) {
      if (strict) {
        if (error) *error = *why;
      } else {
        out.ended_by = fmt::format("entry '{}' ends the list: {}", entry, *why);
      }
      return out;
    }
    if (mig) out.mig_uuids.push_back(*mig);
    if (std::find(out.pci_indices.begin(), out.pci_indices.end(), pci_index) == out.pci_indices.end())
      out.pci_indices.push_back(pci_index);
  }
  return out;
}

}  // namespace

bool VisibleDevices::Allows(unsigned pci_index) const {
  return !restricted || std::find(pci_indices.begin(), pci_indices.end(), pci_index) != pci_indices.end();
}

VisibleDevices ParseCudaVisibleDevices(std::optional<std::string_view> value, const GpuSnapshot& snapshot) {
  if (!value) return VisibleDevices{};
  return Walk(*value, snapshot, /*strict=*/false, nullptr);
}

VisibleDevices ParseGpuList(std::string_view value, const GpuSnapshot& snapshot, std::string* error) {
  return Walk(value, snapshot, /*strict=*/true, error);
}

namespace {

// "0,2,4-5" -> {0, 2, 4, 5}; nullopt when it is not such a list.
std::optional<std::vector<unsigned>> ParseIndexList(std::string_view value) {
  constexpr unsigned long long kMaxIndex = 1024;
  std::vector<unsigned> out;
  std::vector<bool> seen(kMaxIndex + 1);
  if (Trim(value).empty()) return out;
  for (const std::string& raw : Split(value, ',')) {
    std::string_view entry = Trim(raw);
    const size_t dash = entry.find('-');
    unsigned long long first = 0;
    unsigned long long last = 0;
    if (dash == std::string_view::npos) {
      if (!ParseUint(entry, &first)) return std::nullopt;
      last = first;
    } else if (!ParseUint(entry.substr(0, dash), &first) || !ParseUint(entry.substr(dash + 1), &last) || last < first) {
      return std::nullopt;
    }
    if (last > kMaxIndex) return std::nullopt;
    for (auto i = first; i <= last; ++i) {
      if (!seen[i]) out.push_back(static_cast<unsigned>(i));
      seen[i] = true;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Contains(const std::vector<unsigned>& list, unsigned i) { return std::find(list.begin(), list.end(), i) != list.end(); }

// True if MIG device `mig` (a MIG UUID, or the older "MIG-GPU-<uuid>/<gi>/<ci>") is on one of `gpus`.
bool MigParentIn(const std::string& mig, const std::vector<unsigned>& gpus, const GpuSnapshot& snapshot) {
  for (unsigned i : gpus) {
    const GpuDevice& d = snapshot.devices[i];
    if (ToLower("MIG-" + d.uuid) == ToLower(mig.substr(0, mig.find('/')))) return true;
    for (const auto& m : d.mig_devices)
      if (m.uuid == mig) return true;
  }
  return false;
}

// CUDA_VISIBLE_DEVICES as CUDA reads it when it sees only `allocation` (PCI order): parsed against
// those GPUs alone, then mapped back to the node's PCI indices.
VisibleDevices ParseWithin(std::optional<std::string_view> value, const std::vector<unsigned>& allocation,
                           const GpuSnapshot& snapshot) {
  GpuSnapshot seen;
  for (unsigned i : allocation) {
    seen.devices.push_back(snapshot.devices[i]);
    seen.devices.back().pci_index = static_cast<unsigned>(seen.devices.size() - 1);
  }
  VisibleDevices v = ParseCudaVisibleDevices(value, seen);
  v.restricted = true;
  if (!value) {
    v.pci_indices = allocation;
    return v;
  }
  for (unsigned& i : v.pci_indices) i = allocation[i];
  return v;
}

}  // namespace

InheritedGpus InheritedGpusFrom(const std::function<std::optional<std::string>(const char*)>& env) {
  InheritedGpus out;
  out.cuda_visible_devices = env("CUDA_VISIBLE_DEVICES");
  if (!env("SLURM_JOB_ID") || !env("SLURMD_NODENAME")) return out;
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    if (auto value = env(name)) {
      out.slurm_gpus = std::move(value);
      out.slurm_variable = name;
      break;
    }
  }
  return out;
}

VisibleDevices ParseInheritedGpus(const InheritedGpus& inherited, const GpuSnapshot& snapshot) {
  const auto cuda = inherited.cuda_visible_devices ? std::optional<std::string_view>(*inherited.cuda_visible_devices)
                                                   : std::nullopt;
  if (!inherited.slurm_gpus) return ParseCudaVisibleDevices(cuda, snapshot);
  auto allocation = ParseIndexList(*inherited.slurm_gpus);
  if (!allocation) {
    VisibleDevices none;
    none.restricted = true;
    none.ended_by = fmt::format("{}='{}' is not a list of GPU indices: no GPU is used", inherited.slurm_variable,
                                *inherited.slurm_gpus);
    return none;
  }
  const unsigned count = static_cast<unsigned>(snapshot.devices.size());
  const bool beyond = !allocation->empty() && allocation->back() >= count;
  if (beyond) {
    if (allocation->size() == count) return ParseCudaVisibleDevices(cuda, snapshot);  // NVML shows only the allocation
    VisibleDevices none;
    none.restricted = true;
    none.ended_by = fmt::format("{}='{}' names GPUs this node does not show ({} GPUs here): no GPU is used",
                                inherited.slurm_variable, *inherited.slurm_gpus, count);
    return none;
  }
  bool hidden = allocation->size() < count;
  for (unsigned i = 0; i < count && hidden; ++i)
    if (!Contains(*allocation, i) && !snapshot.devices[i].failed()) hidden = false;
  if (hidden) return ParseWithin(cuda, *allocation, snapshot);
  VisibleDevices v = ParseCudaVisibleDevices(cuda, snapshot);
  if (!v.restricted) {
    v.restricted = true;
    v.pci_indices = *allocation;
    return v;
  }
  std::vector<unsigned> kept;
  for (unsigned i : v.pci_indices) {
    if (Contains(*allocation, i)) {
      kept.push_back(i);
    } else if (!v.ended_by) {
      v.ended_by = fmt::format("GPU {} is outside the Slurm allocation ({}={}) and is not used", i,
                               inherited.slurm_variable, *inherited.slurm_gpus);
    }
  }
  std::vector<std::string> migs;
  for (const auto& m : v.mig_uuids)
    if (MigParentIn(m, kept, snapshot)) migs.push_back(m);
  v.pci_indices = std::move(kept);
  v.mig_uuids = std::move(migs);
  return v;
}

Result<std::vector<std::string>> ResolveAllowedGpus(const std::string& gpu_list, const InheritedGpus& inherited,
                                                    const GpuSnapshot& snapshot) {
  VisibleDevices visible = ParseInheritedGpus(inherited, snapshot);
  std::vector<unsigned> allowed;
  if (gpu_list.empty()) {
    for (const auto& d : snapshot.devices)
      if (visible.Allows(d.pci_index)) allowed.push_back(d.pci_index);
  } else {
    std::string error;
    VisibleDevices listed = ParseGpuList(gpu_list, snapshot, &error);
    if (!error.empty()) return MakeError(ErrorKind::kInvalidArgument, fmt::format("--gpus {}: {}", gpu_list, error));
    for (unsigned i : listed.pci_indices)
      if (visible.Allows(i)) allowed.push_back(i);
    std::sort(allowed.begin(), allowed.end());
  }
  std::vector<std::string> uuids;
  for (unsigned i : allowed) uuids.push_back(snapshot.devices[i].uuid);
  return uuids;
}

std::string FormatVisibleDevices(const GpuSnapshot& snapshot, std::vector<unsigned> chosen, bool uuids) {
  std::sort(chosen.begin(), chosen.end());
  std::string out;
  for (unsigned i : chosen) {
    if (!out.empty()) out += ',';
    out += uuids ? snapshot.devices[i].uuid : std::to_string(i);
  }
  return out;
}

}  // namespace gpulane
