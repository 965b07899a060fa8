#include "exec/isolation_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "util/say.h"

namespace gpulane::exec {
namespace {

bool EnvIs(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == value;
}

}  // namespace

IsolationRun::IsolationRun(const IsolationPlan* plan, long long plan_us) : plan_us_(plan_us) {
  if (!plan) return;
  masks_ = plan->masked.size();
  proc_words_ = plan->proc_nvidia.empty() ? "absent"
                                          : fmt::format("tmpfs, {} bind(s) back", plan->proc_kept.size() + plan->gpus_kept.size());
  fds.timing = EnvIs("GPULANE_ISOLATE_TIMING", "1");
  int p[2];
  if (!EnvIs("GPULANE_ISOLATE_HOLDER", "0") && pipe2(p, O_CLOEXEC) == 0) {
    fds.hold_read = p[0];
    hold_write_ = p[1];
  }
  if (fds.timing) fds.host_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
}

IsolationRun::~IsolationRun() {
  Forked();
  Release();
}

void IsolationRun::Forked() {
  for (int* fd : {&fds.hold_read, &fds.host_ns})
    if (*fd >= 0) close(std::exchange(*fd, -1));
}

void IsolationRun::Isolated(pid_t holder_pid, const IsolationSteps& t) {
  applied = true;
  holder = holder_pid;
  if (!fds.timing) return;
  auto us = [](std::int64_t from, std::int64_t to) { return to && from ? (to - from) / 1000 : -1; };
  Say("gpulane: isolate timing: plan {} us (spawner); in the child: unshare {} us, / rslave {} us, "
      "{} device mask(s) {} us, /proc/driver/nvidia ({}) {} us, holder {} us ({}); {} us in all\n",
      plan_us_, us(t.start_ns, t.unshare_ns), us(t.unshare_ns, t.slave_ns), masks_, us(t.slave_ns, t.masks_ns),
      proc_words_, us(t.masks_ns, t.proc_ns), us(t.proc_ns, t.holder_ns),
      holder > 0 ? "started" : "none: the job frees its namespace itself", us(t.start_ns, t.holder_ns));
}

void IsolationRun::Release() {
  if (hold_write_ >= 0) close(std::exchange(hold_write_, -1));
}

}  // namespace gpulane::exec
