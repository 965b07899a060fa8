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

Result<std::vector<std::string>> ResolveAllowedGpus(const std::string& gpu_list,
                                                    const std::optional<std::string>& cuda_visible_devices,
                                                    const GpuSnapshot& snapshot) {
  const auto inherited = cuda_visible_devices ? std::optional<std::string_view>(*cuda_visible_devices) : std::nullopt;
  VisibleDevices visible = ParseCudaVisibleDevices(inherited, snapshot);
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
