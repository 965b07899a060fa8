#include "exec/job_env.h"

#include <unistd.h>  // environ (declared with C linkage: a C++ declaration of it first breaks unity builds)

#include <algorithm>

#include "gpu/visible_devices.h"

namespace gpulane::exec {

std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& kv : env)
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  return std::nullopt;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) out.emplace_back(*e);
  return out;
}

std::vector<std::string> JobEnvironment(const std::vector<std::string>& base, const GpuSnapshot& snapshot, const std::vector<unsigned>& gpus, bool uuids,
                                        const std::string& job_id, std::optional<std::uint64_t> mem_bytes,
                                        int lease_fd, const std::optional<std::string>& mig_uuid) {
  std::vector<std::string> env;
  for (const std::string& kv : base) {
    bool ours = false;
    for (const char* key : {"CUDA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER=", "GPULANE_JOB_ID=", "GPULANE_GPU_UUIDS=",
                            "GPULANE_GPU_INDICES=", "GPULANE_MEM_BYTES=", "GPULANE_LEASE_FD=",
                            "GPULANE_ARRAY_INDEX="})
      ours = ours || kv.rfind(key, 0) == 0;
    if (ours) continue;
    env.push_back(kv);
  }
  std::vector<unsigned> sorted = gpus;
  std::sort(sorted.begin(), sorted.end());
  std::string uuid_list, index_list;
  for (unsigned i : sorted) {
    uuid_list += (uuid_list.empty() ? "" : ",") + snapshot.devices[i].uuid;
    index_list += (index_list.empty() ? "" : ",") + std::to_string(i);
  }
  // A MIG device: CUDA takes it only by its MIG- UUID (and sees one MIG device per process).
  if (mig_uuid) uuid_list = *mig_uuid;
  env.push_back("CUDA_VISIBLE_DEVICES=" + (mig_uuid ? *mig_uuid : FormatVisibleDevices(snapshot, sorted, uuids)));
  env.push_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");
  env.push_back("GPULANE_JOB_ID=" + job_id);
  env.push_back("GPULANE_GPU_UUIDS=" + uuid_list);
  env.push_back("GPULANE_GPU_INDICES=" + index_list);
  if (mem_bytes) env.push_back("GPULANE_MEM_BYTES=" + std::to_string(*mem_bytes));
  if (lease_fd >= 0) env.push_back("GPULANE_LEASE_FD=" + std::to_string(lease_fd));
  return env;
}

}  // namespace gpulane::exec
