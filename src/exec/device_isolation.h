#pragma once
// Device isolation: inside a job only its GPUs exist (docs/security.md "Device isolation").
//
// The job runner's forked child, still root and before it becomes the job's user, enters a mount
// namespace of its own (unshare(CLONE_NEWNS), / made MS_REC|MS_SLAVE: nothing propagates out, the
// machine's later mounts such as an automounted home still propagate in) and:
//   - binds /dev/null over /dev/nvidiaN of every GPU the job was not granted (N: the minor number,
//     which NVML reports and which differs from the index), found by name in the device directory;
//   - binds /dev/null over the /dev/nvidia-caps/nvidia-capM of every MIG GPU or compute instance
//     that is not the job's (from /proc/driver/nvidia-caps/mig-minors);
//   - mounts a read-only tmpfs over /proc/driver/nvidia in which everything is bound back from the
//     original but gpus/, which holds only the job's GPUs' <pci bus id> entries, and params, a
//     copy saying "ModifyDeviceFiles: 0" so that the driver's setuid helper (nvidia-modprobe) never
//     recreates a masked node (what libnvidia-container does for containers).
// /dev/nvidiactl, /dev/nvidia-uvm*, /dev/nvidia-modeset and the job's own nodes are untouched.
// Nothing outside the job changes. The planning is done in the parent (it reads directories and
// allocates); the child only makes system calls.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/types.h"
#include "os/spawn.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/result.h"

namespace gpulane::exec {

/// Where the device nodes and the driver's /proc entries are. The real ones, or a test's tree:
/// GPULANE_DEV_ROOT and GPULANE_PROC_DRIVER_ROOT (tests only; the same trust as
/// GPULANE_NVML_LIBRARY: whoever sets the spawner's environment).
struct IsolationRoots {
  std::string dev_dir = "/dev";
  std::string proc_driver_dir = "/proc/driver";
  static IsolationRoots FromEnvironment();
};

/// A GPU (or MIG device) the job was granted.
struct GrantedDevice {
  std::optional<unsigned> minor;            ///< N of /dev/nvidiaN (nullopt: NVML did not say)
  std::string pci_bus_id;                   ///< "00000000:18:00.0" (NVML's spelling)
  bool mig = false;                         ///< a MIG device of that GPU, with these ids (nullopt: unknown)
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
  std::string label;                        ///< "GPU1", for messages
};

/// The granted devices of a grant: `gpus` (PCI-order indices of `snapshot`) and, for --mig, the MIG
/// device `mig_uuid` on the GPU in `gpus`.
std::vector<GrantedDevice> GrantedDevices(const GpuSnapshot& snapshot, const std::vector<unsigned>& gpus,
                                          const std::optional<std::string>& mig_uuid);

/// One entry of /proc/driver/nvidia kept in the job's view (bound back from the original).
struct KeptEntry {
  std::string path;  ///< absolute path: the original before the tmpfs covers it, the mount point after
  bool is_dir = false;
};

/// What the child does, every path absolute and made in the parent.
struct IsolationPlan {
  std::string null_device = "/dev/null";  ///< bound over each masked node
  std::vector<std::string> masked;        ///< device nodes bound over with null_device
  std::string proc_nvidia;                ///< "<proc>/nvidia": covered with a tmpfs ("" = absent, left)
  std::vector<KeptEntry> proc_kept;       ///< its entries bound back (gpus/ and params excepted)
  std::string gpus_dir;                   ///< "<proc>/nvidia/gpus" ("" = it had none)
  std::vector<std::string> gpus_kept;     ///< the job's GPUs' entries under it
  std::string params_path;                ///< "<proc>/nvidia/params" ("" = it had none)
  std::string params_text;                ///< its text with ModifyDeviceFiles: 0
  std::string summary;                    ///< "devices: GPU1 only (3 device nodes masked)", for logs
  /// Nothing to hide (no other GPU's node, no driver entries: a machine without the driver): the
  /// job needs no namespace of its own.
  bool empty() const { return masked.empty() && proc_nvidia.empty(); }
};

/// The plan for a job granted `granted` (empty: -g 0, no GPU at all); empty() when the machine has
/// no node or driver entry to hide. Errors (their message says what cannot be done: "isolate the
/// job's GPUs: ..."): kInvalidArgument naming the GPU when a granted GPU's minor number or a MIG
/// device's instance ids are unknown and there is something to hide (the job's own node cannot be
/// told apart from the others), kIo when a directory that exists cannot be read.
Result<IsolationPlan> PlanIsolation(const std::vector<GrantedDevice>& granted, const IsolationRoots& roots);

/// When each step of ApplyIsolation ended, Clock::MonotonicNs (0: not reached), for the
/// timing split (GPULANE_ISOLATE_TIMING=1, exec/job_runner.h).
struct IsolationSteps {
  std::int64_t start_ns = 0, unshare_ns = 0, slave_ns = 0, masks_ns = 0, proc_ns = 0, holder_ns = 0;
};

/// In the forked child, as root, before the uid switch: carries `plan` out (async-signal-safe:
/// system calls and snprintf only). False on the first step that fails, with `what` (size
/// `what_size`) naming it and `*err` the errno. `steps` (may be null) records when each step ended,
/// on `clock` (the job runner's: its MonotonicNs must be async-signal-safe, as SystemClock's is).
bool ApplyIsolation(const IsolationPlan& plan, const Clock& clock, char* what, std::size_t what_size, int* err,
                    IsolationSteps* steps = nullptr);

/// The namespace holder (docs/security.md "Device isolation", "Its cost"). The kernel frees a mount
/// namespace when its last process leaves it, and waits for an RCU grace period there
/// (namespace_unlock's synchronize_rcu_expedited): milliseconds that, without a holder, the job's
/// exit and so its spawner's wait pay. Called in the forked child right after ApplyIsolation, this
/// starts a process in the job's namespace that keeps it alive past the job's end: a sibling of
/// the job (a child of the spawner, CLONE_PARENT), in a process group of its own, ignoring the
/// job's signals, holding no descriptor but `hold_fd` (the read end of a pipe whose write end only
/// the spawner keeps, close-on-exec) and, when `timing_fd` >= 0, that one (stderr, for the timing
/// line). It waits for the end of the pipe and exits, freeing the namespace then, while nobody
/// waits for it; with `timing_fd` >= 0 and `host_ns_fd` (the spawner's namespace, opened before
/// unshare) it first leaves the namespace by setns, timing the kernel's teardown, and writes
/// "gpulane: isolate timing: ... namespace freed in N us" to `timing_fd`. Async-signal-safe; the
/// holder runs on a static stack in the child's memory (CLONE_VM: no page tables copied), which
/// the job's execve leaves to the holder alone. Returns its pid, or -1 (the job then frees its
/// namespace at its own exit, as without a holder: slower, nothing else changes).
pid_t StartNamespaceHolder(int hold_fd, int timing_fd, int host_ns_fd, const Clock& clock);

/// The [run] isolate setting as the spawner applies it.
struct IsolationSetting {
  bool devices = true;    ///< [run] isolate = "devices" (true) or "off"
  bool required = false;  ///< [run] isolate_required: a job that cannot be isolated fails to start
};

/// Whether this process can give a child a private mount namespace (a child started by `spawner` tries
/// unshare(CLONE_NEWNS) and making / private, then exits): what device isolation needs. Errors:
/// kIo naming the step and the errno.
Status ProbeIsolation(os::Spawner& spawner);

/// The setting of `config`'s [run] isolate and isolate_required.
IsolationSetting IsolationOf(const Config& config);

/// How a job will be isolated, in words for `show` and `doctor`: "devices", "off", or
/// "advice-only (...)" when the spawner is not root.
std::string IsolationWords(const IsolationSetting& setting, bool spawner_is_root);

}  // namespace gpulane::exec
