#include "exec/device_isolation.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "gpu/ordering.h"
#include "util/strings.h"

namespace gpulane::exec {
namespace {

struct DirEntry {
  std::string name;
  bool is_dir = false;
  bool is_symlink = false;
};

// The entries of `dir` ("." and ".." left out) whose names start with `prefix` (only those are
// stat'ed: /dev holds hundreds of nodes, and the job waits for this listing after its lease is
// granted). nullopt when it does not exist; kIo when it exists and cannot be read.
Result<std::optional<std::vector<DirEntry>>> ListDir(const std::string& dir, std::string_view prefix = {}) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::vector<DirEntry>>();
    return MakeError(ErrorKind::kIo, fmt::format("isolate the job's GPUs: cannot read {}: {}", dir, std::strerror(errno)));
  }
  std::vector<DirEntry> out;
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name.compare(0, prefix.size(), prefix) != 0) continue;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back({name, S_ISDIR(st.st_mode), S_ISLNK(st.st_mode)});
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return std::optional(std::move(out));
}

// N of "<prefix>N" (decimal digits only), or nullopt.
std::optional<unsigned> NumberAfter(const std::string& name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  unsigned long long n = 0;
  if (!ParseUint(std::string_view(name).substr(prefix.size()), &n) || n > 1'000'000) return std::nullopt;
  return static_cast<unsigned>(n);
}

// A /proc/driver/nvidia/gpus entry is named by bus id in lower case, with a 4- or 8-digit domain
// ("0000:18:00.0"); NVML spells it "00000000:18:00.0".
bool SameBusId(const std::string& proc_name, const std::string& nvml_bus_id) {
  return !nvml_bus_id.empty() && NormalizePciBusId(proc_name) == NormalizePciBusId(nvml_bus_id);
}

// Whether the MIG capability named by a mig-minors line ("gpu0/gi1/access", "gpu0/gi1/ci0/access")
// is one the job was granted. Lines not about a GPU ("config", "monitor") are nullopt: left alone.
std::optional<bool> CapabilityGranted(const std::string& key, const std::vector<GrantedDevice>& granted) {
  const std::vector<std::string> parts = Split(key, '/');
  if (parts.size() < 2) return std::nullopt;
  const auto gpu = NumberAfter(parts[0], "gpu");
  if (!gpu) return std::nullopt;
  const auto gi = NumberAfter(parts[1], "gi");
  const std::optional<unsigned> ci = parts.size() >= 4 ? NumberAfter(parts[2], "ci") : std::nullopt;
  for (const GrantedDevice& g : granted) {
    if (g.minor != gpu || !g.mig) continue;
    if (gi == g.gpu_instance_id && (!ci || ci == g.compute_instance_id)) return true;
  }
  return false;
}

// The MIG capability device nodes of `caps_dir` that are not the job's, from `mig_minors` (the text
// of /proc/driver/nvidia-caps/mig-minors: "<key> <minor>" lines).
std::vector<std::string> MaskedCapabilities(const std::string& caps_dir, const std::string& mig_minors,
                                            const std::set<std::string>& present,
                                            const std::vector<GrantedDevice>& granted) {
  std::vector<std::string> out;
  std::istringstream lines(mig_minors);
  std::string key;
  unsigned minor = 0;
  while (lines >> key >> minor) {
    const auto mine = CapabilityGranted(key, granted);
    const std::string node = fmt::format("nvidia-cap{}", minor);
    if (mine && !*mine && present.count(node)) out.push_back(caps_dir + "/" + node);
  }
  return out;
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The minor of a capability from its driver entry ("DeviceFileMinor: 1" in
// /proc/driver/nvidia/capabilities/mig/config); nullopt when absent or unreadable.
std::optional<unsigned> CapabilityMinor(const std::string& entry) {
  const std::string text = ReadWhole(entry);
  const std::string key = "DeviceFileMinor: ";
  const std::size_t at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  const std::size_t end = text.find('\n', at);
  unsigned long long n = 0;
  if (!ParseUint(std::string_view(text).substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size()), &n) ||
      n > 1'000'000)
    return std::nullopt;
  return static_cast<unsigned>(n);
}

// Whether the capability nodes `present` may hold a GPU or compute instance's: false only when
// each is the driver's MIG "config" or "monitor" capability, as their own entries say (never
// masked, and what a machine without MIG instances has). mig-minors, which names every node, is
// generated by the driver at each read, a line for every capability it could ever have: most of
// isolation's cost on an H100 (docs/security.md, "Device isolation"), so it is read only when a
// node may be an instance's.
bool MayHoldInstanceCapabilities(const std::set<std::string>& present, const IsolationRoots& roots) {
  const std::string mig = roots.proc_driver_dir + "/nvidia/capabilities/mig/";
  const auto config = CapabilityMinor(mig + "config"), monitor = CapabilityMinor(mig + "monitor");
  if (!config || !monitor) return !present.empty();  // unknown: read mig-minors
  for (const std::string& node : present) {
    const auto n = NumberAfter(node, "nvidia-cap");
    if (!n || (*n != *config && *n != *monitor)) return true;
  }
  return false;
}

// The driver's params with ModifyDeviceFiles: 0, so that nothing run in the job (the setuid
// nvidia-modprobe that libcuda calls) recreates a masked node.
std::string WithoutModifyDeviceFiles(std::string params) {
  const std::string key = "ModifyDeviceFiles: ";
  for (std::size_t at = params.find(key); at != std::string::npos; at = params.find(key, at + 1))
    if (at + key.size() < params.size()) params[at + key.size()] = '0';
  return params;
}

Status PlanProc(const std::vector<GrantedDevice>& granted, const IsolationRoots& roots, IsolationPlan& plan) {
  const std::string nvidia = roots.proc_driver_dir + "/nvidia";
  auto entries = ListDir(nvidia);
  if (!entries) return entries.error();
  if (!*entries) return Status::Ok();  // no driver: nothing of it to hide
  plan.proc_nvidia = nvidia;
  for (const DirEntry& e : **entries) {
    if (e.is_symlink) continue;
    if (e.name == "gpus" && e.is_dir) {
      plan.gpus_dir = nvidia + "/gpus";
      auto gpus = ListDir(plan.gpus_dir);
      if (!gpus) return gpus.error();
      for (const DirEntry& g : gpus->value_or(std::vector<DirEntry>{}))
        for (const GrantedDevice& d : granted)
          if (!g.is_symlink && SameBusId(g.name, d.pci_bus_id)) plan.gpus_kept.push_back(plan.gpus_dir + "/" + g.name);
    } else if (e.name == "params" && !e.is_dir) {
      plan.params_path = nvidia + "/params";
      plan.params_text = WithoutModifyDeviceFiles(ReadWhole(plan.params_path));
    } else {
      plan.proc_kept.push_back({nvidia + "/" + e.name, e.is_dir});
    }
  }
  return Status::Ok();
}

}  // namespace

IsolationRoots IsolationRoots::FromEnvironment() {
  IsolationRoots roots;
  if (const char* dev = std::getenv("GPULANE_DEV_ROOT"); dev && *dev) roots.dev_dir = dev;
  if (const char* proc = std::getenv("GPULANE_PROC_DRIVER_ROOT"); proc && *proc) roots.proc_driver_dir = proc;
  return roots;
}

std::vector<GrantedDevice> GrantedDevices(const GpuSnapshot& snapshot, const std::vector<unsigned>& gpus,
                                          const std::optional<std::string>& mig_uuid) {
  std::vector<GrantedDevice> out;
  for (unsigned i : gpus) {
    if (i >= snapshot.devices.size()) continue;
    const GpuDevice& d = snapshot.devices[i];
    GrantedDevice g;
    g.minor = d.minor_number;
    g.pci_bus_id = d.pci_bus_id;
    g.label = fmt::format("GPU{}", i);
    if (mig_uuid) {  // unknown instance ids stay unknown: PlanIsolation refuses rather than guess
      g.mig = true;
      g.label = fmt::format("GPU{} ({})", i, *mig_uuid);
      for (const MigDevice& m : d.mig_devices)
        if (m.uuid == *mig_uuid) g.gpu_instance_id = m.gpu_instance_id, g.compute_instance_id = m.compute_instance_id;
    }
    out.push_back(std::move(g));
  }
  return out;
}

// Why `granted` cannot be told apart from the other GPUs, or "" when it can.
static std::string UnknownIdentity(const std::vector<GrantedDevice>& granted) {
  for (const GrantedDevice& g : granted) {
    if (!g.minor)
      return fmt::format("isolate the job's GPUs: NVML does not report the minor number of {}, so its /dev/nvidiaN "
                         "cannot be told from the others'", g.label);
    if (g.mig && (!g.gpu_instance_id || !g.compute_instance_id))
      return fmt::format("isolate the job's MIG device: NVML does not report the instance ids of {}", g.label);
  }
  return "";
}

Result<IsolationPlan> PlanIsolation(const std::vector<GrantedDevice>& granted, const IsolationRoots& roots) {
  IsolationPlan plan;
  std::set<unsigned> minors;
  for (const GrantedDevice& g : granted)
    if (g.minor) minors.insert(*g.minor);
  auto dev = ListDir(roots.dev_dir, "nvidia");  // /dev/nvidiaN: nothing else is masked here
  if (!dev) return dev.error();
  for (const DirEntry& e : dev->value_or(std::vector<DirEntry>{})) {
    const auto n = NumberAfter(e.name, "nvidia");
    if (n && !e.is_dir && !minors.count(*n)) plan.masked.push_back(roots.dev_dir + "/" + e.name);
  }
  const std::size_t gpu_nodes = plan.masked.size();
  const std::string caps_dir = roots.dev_dir + "/nvidia-caps";
  auto caps = ListDir(caps_dir);
  if (!caps) return caps.error();
  if (*caps) {
    std::set<std::string> present;
    for (const DirEntry& e : **caps)
      if (!e.is_dir) present.insert(e.name);
    if (MayHoldInstanceCapabilities(present, roots)) {
      const auto masked = MaskedCapabilities(caps_dir, ReadWhole(roots.proc_driver_dir + "/nvidia-caps/mig-minors"), present, granted);
      plan.masked.insert(plan.masked.end(), masked.begin(), masked.end());
    }
  }
  if (Status proc = PlanProc(granted, roots, plan); !proc.ok()) return proc.error();
  // Without the driver's nodes and entries there is nothing to hide, known minor numbers or not.
  if (const std::string unknown = UnknownIdentity(granted); !unknown.empty() && !plan.empty())
    return MakeError(ErrorKind::kInvalidArgument, unknown);
  std::vector<std::string> labels;
  for (const GrantedDevice& g : granted) labels.push_back(g.label);
  plan.summary = fmt::format("devices: {} ({} GPU device node{} and {} MIG capability node{} masked)",
                             labels.empty() ? "no GPU" : Join(labels, ", ") + " only", gpu_nodes, gpu_nodes == 1 ? "" : "s",
                             plan.masked.size() - gpu_nodes, plan.masked.size() - gpu_nodes == 1 ? "" : "s");
  return plan;
}

namespace {

bool Failed(char* what, std::size_t size, int* err, const char* step, const char* path) {
  *err = errno;
  std::snprintf(what, size, "isolate the job's GPUs (%s %s)", step, path);
  return false;
}

// Binds the open O_PATH descriptor `fd` over `target`.
bool BindFd(int fd, const char* target) {
  char source[64];
  std::snprintf(source, sizeof source, "/proc/self/fd/%d", fd);
  return mount(source, target, nullptr, MS_BIND, nullptr) == 0;
}

// An empty directory or file at `path` to mount on.
bool MakeMountPoint(const char* path, bool is_dir) {
  if (is_dir) return mkdir(path, 0555) == 0;
  const int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
  return fd >= 0 && close(fd) == 0;
}

// The tmpfs over /proc/driver/nvidia: each kept entry bound back, gpus/ with the job's GPUs'
// entries only, params rewritten; read-only once made.
bool CoverProc(const IsolationPlan& plan, char* what, std::size_t size, int* err) {
  // Opened before the tmpfs hides them, in this namespace (a bind's source must be in it).
  constexpr std::size_t kMaxKept = 256;
  int kept_fds[kMaxKept], gpu_fds[kMaxKept];
  const std::size_t kept = std::min(plan.proc_kept.size(), kMaxKept), gpus = std::min(plan.gpus_kept.size(), kMaxKept);
  for (std::size_t i = 0; i < kept; ++i)
    if ((kept_fds[i] = open(plan.proc_kept[i].path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
      return Failed(what, size, err, "open", plan.proc_kept[i].path.c_str());
  for (std::size_t i = 0; i < gpus; ++i)
    if ((gpu_fds[i] = open(plan.gpus_kept[i].c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
      return Failed(what, size, err, "open", plan.gpus_kept[i].c_str());
  const char* root = plan.proc_nvidia.c_str();
  if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=1m") != 0)
    return Failed(what, size, err, "mount a tmpfs over", root);
  for (std::size_t i = 0; i < kept; ++i) {
    const char* path = plan.proc_kept[i].path.c_str();
    if (!MakeMountPoint(path, plan.proc_kept[i].is_dir) || !BindFd(kept_fds[i], path)) return Failed(what, size, err, "bind back", path);
    close(kept_fds[i]);
  }
  if (!plan.gpus_dir.empty() && mkdir(plan.gpus_dir.c_str(), 0555) != 0) return Failed(what, size, err, "make", plan.gpus_dir.c_str());
  for (std::size_t i = 0; i < gpus; ++i) {
    const char* path = plan.gpus_kept[i].c_str();
    if (mkdir(path, 0555) != 0 || !BindFd(gpu_fds[i], path)) return Failed(what, size, err, "bind back", path);
    close(gpu_fds[i]);
  }
  if (!plan.params_path.empty()) {
    const int fd = open(plan.params_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0444);
    const auto length = static_cast<ssize_t>(plan.params_text.size());
    if (fd < 0 || write(fd, plan.params_text.data(), plan.params_text.size()) != length)
      return Failed(what, size, err, "write", plan.params_path.c_str());
    close(fd);
  }
  if (mount(nullptr, root, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555") != 0)
    return Failed(what, size, err, "make read-only", root);
  return true;
}

}  // namespace

bool ApplyIsolation(const IsolationPlan& plan, const Clock& clock, char* what, std::size_t what_size, int* err,
                    IsolationSteps* steps) {
  IsolationSteps ignored;
  IsolationSteps& at = steps ? *steps : ignored;
  at.start_ns = clock.MonotonicNs();
  if (unshare(CLONE_NEWNS) != 0) return Failed(what, what_size, err, "unshare the mount namespace:", "CLONE_NEWNS");
  at.unshare_ns = clock.MonotonicNs();
  // A slave from / down: the masks below never propagate to the rest of the machine, while the
  // machine's later mounts (an automounted home) still reach the job, as systemd's PrivateTmp= does.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return Failed(what, what_size, err, "make a slave", "/");
  at.slave_ns = clock.MonotonicNs();
  for (const std::string& node : plan.masked)
    if (mount(plan.null_device.c_str(), node.c_str(), nullptr, MS_BIND, nullptr) != 0)
      return Failed(what, what_size, err, "bind /dev/null over", node.c_str());
  at.masks_ns = clock.MonotonicNs();
  if (!plan.proc_nvidia.empty() && !CoverProc(plan, what, what_size, err)) return false;
  at.proc_ns = clock.MonotonicNs();
  return true;
}

namespace {

// The holder's stack and arguments: static, in the forked child's memory, which the holder shares
// (CLONE_VM) and keeps once the job's execve gives the job a memory of its own.
struct HolderArgs {
  int hold_fd = -1, timing_fd = -1, host_ns_fd = -1;
  const Clock* clock = nullptr;  ///< times the namespace's teardown
};
HolderArgs g_holder;
alignas(64) char g_holder_stack[64 * 1024];

// Closes every descriptor but `keep` (sorted, -1 entries ignored).
void CloseAllBut(int a, int b, int c) {
  int keep[3] = {a, b, c};
  std::sort(keep, keep + 3);
  unsigned from = 0;
  for (int fd : keep) {
    if (fd < 0) continue;
    if (static_cast<unsigned>(fd) > from) syscall(SYS_close_range, from, static_cast<unsigned>(fd) - 1, 0U);
    from = static_cast<unsigned>(fd) + 1;
  }
  syscall(SYS_close_range, from, ~0U, 0U);
}

// Not instrumented by ASan: it runs on a stack ASan does not know (clone), where the check ASan
// adds before a call that never returns warns. It returns instead of calling _exit: glibc's clone
// then ends it with exit(2).
__attribute__((no_sanitize_address)) int HolderMain(void*) {
  const HolderArgs args = g_holder;
  // Its own process group, deaf to the job's signals: nothing the job is sent ends it early.
  setpgid(0, 0);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGPIPE})
    sigaction(sig, &ignore, nullptr);
  CloseAllBut(args.hold_fd, args.timing_fd, args.host_ns_fd);
  char byte;
  while (read(args.hold_fd, &byte, 1) > 0) {
  }
  if (args.timing_fd >= 0 && args.host_ns_fd >= 0) {
    const std::int64_t before = args.clock->MonotonicNs();
    const int left = setns(args.host_ns_fd, CLONE_NEWNS);
    const std::int64_t freed_us = (args.clock->MonotonicNs() - before) / 1000;
    char line[160];
    const int n = std::snprintf(line, sizeof line,
                                "gpulane: isolate timing: after the job, off its path: namespace freed in %lld us%s\n",
                                static_cast<long long>(freed_us), left == 0 ? "" : " (setns failed: not measured)");
    if (n > 0) (void)!write(args.timing_fd, line, static_cast<std::size_t>(n));
  }
  return 0;
}

}  // namespace

pid_t StartNamespaceHolder(int hold_fd, int timing_fd, int host_ns_fd, const Clock& clock) {
  g_holder = {hold_fd, timing_fd, host_ns_fd, &clock};
  return clone(HolderMain, g_holder_stack + sizeof g_holder_stack, CLONE_VM | CLONE_PARENT, nullptr);
}

Status ProbeIsolation(os::Spawner& spawner) {
  auto started = spawner.Start([] {
    if (unshare(CLONE_NEWNS) != 0) _exit(1);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) _exit(2);
    _exit(0);
  });
  if (!started) return MakeError(ErrorKind::kIo, "cannot " + started.error().message);
  const pid_t child = *started;
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  const int step = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  return MakeError(ErrorKind::kIo, step == 1   ? "unshare(CLONE_NEWNS) is refused (no CAP_SYS_ADMIN here?)"
                                   : step == 2 ? "the mount namespace's / cannot be made a slave (MS_REC|MS_SLAVE)"
                                               : "the probe's child did not exit");
}

IsolationSetting IsolationOf(const Config& config) { return {config.isolate == "devices", config.isolate_required}; }

std::string IsolationWords(const IsolationSetting& setting, bool spawner_is_root) {
  if (!setting.devices) return "off";
  if (!spawner_is_root)
    return "advice-only (jobs are not started as root here, so they cannot be given a mount namespace of their own: "
           "CUDA_VISIBLE_DEVICES only)";
  return setting.required ? "devices (required: a job that cannot be isolated fails to start)" : "devices";
}

}  // namespace gpulane::exec
