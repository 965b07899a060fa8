// gpulane _lease (the Python package's lease()): the lease is held for the parent *process*, so it
// outlives the parent's thread that started the holder, and ends with the process.
#include "integration/run_support.h"

namespace gpulane::test {
namespace {

// A Python parent whose worker thread starts `gpulane _lease -g 1` and ends once it holds the
// GPU; the main thread waits until the kernel has finished that thread (its /proc task is gone:
// the parent-death signal has been sent by then) and until the holder has taken the signal (none
// pending), then says whether the holder still runs, and waits to be killed.
constexpr const char* kThreadParent = R"PY(
import json, os, subprocess, sys, threading, time
box = {}
def start():
    box["tid"] = threading.get_native_id()
    p = subprocess.Popen([os.environ["GPULANE"], "_lease", "-q", "-g", "1"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    box["proc"], box["grant"] = p, json.loads(p.stdout.readline())
t = threading.Thread(target=start)
t.start()
t.join()
p = box["proc"]
deadline = time.monotonic() + 20
def pending_or_gone():
    if os.path.exists("/proc/self/task/%d" % box["tid"]):
        return True
    try:
        with open("/proc/%d/status" % p.pid) as f:
            fields = dict(line.split(":", 1) for line in f)
    except OSError:
        return False
    if fields["State"].strip().startswith("Z"):
        return False
    mask = int(fields["ShdPnd"], 16) | int(fields["SigPnd"], 16)
    return mask & ((1 << (12 - 1)) | (1 << (15 - 1)))  # SIGUSR2, SIGTERM
while pending_or_gone() and time.monotonic() < deadline:
    time.sleep(0.005)
print(json.dumps({"gpus": box["grant"]["gpus"], "alive": p.poll() is None}), flush=True)
threading.Event().wait()
)PY";

TEST(LeaseHold, OutlivesTheParentsThreadThatStartedIt) {
  FakeMachine machine(IdleMachine(1));
  Env env = RunEnv(machine, {{"GPULANE", GpulaneBinary()}});
  Child parent({"/usr/bin/env", "python3", "-c", kThreadParent}, env);
  ASSERT_TRUE(Eventually([&] { return Contains(parent.OutSoFar(), "\n"); }, 30)) << parent.ErrSoFar();
  const json first = json::parse(parent.OutSoFar().substr(0, parent.OutSoFar().find('\n')));
  EXPECT_EQ(first["gpus"], json::array({0}));
  EXPECT_TRUE(first["alive"].get<bool>()) << "the holder ended with the thread that started it";
  // The GPU is still leased: nobody else gets it now.
  RunResult other = RunOn(machine, {"-q", "--no-wait", "--", "true"});
  EXPECT_EQ(other.exit_code, 5) << other.err;
  parent.Kill(SIGKILL);  // the parent process dies: the lease ends with it
  parent.Wait(10);
  ASSERT_TRUE(Eventually([&] { return RunOn(machine, {"-q", "--no-wait", "--", "true"}).exit_code == 0; }, 20));
}

// It used to refuse --time-limit (nothing stopped the parent): now the lease's own side stops the
// process it holds the lease for at the limit (issue 23, item 9; LimitHoles.* has the daemon's side).
TEST(LeaseHold, StopsTheProcessItHoldsTheLeaseForAtItsTimeLimit) {
  FakeMachine machine(IdleMachine(1));
  Child parent({"/bin/sh", "-c", "sleep 30 | " + GpulaneBinary() + " _lease --time-limit 1s; echo survived"}, RunEnv(machine));
  auto ended = parent.Wait(20);
  ASSERT_TRUE(ended) << "the leasing process still runs: " << parent.ErrSoFar();
  EXPECT_FALSE(Contains(ended->out, "survived")) << "it was stopped, not left running";
  EXPECT_TRUE(Eventually([&] { return Contains(parent.ErrSoFar(), "gpulane: the lease's time limit of 1.0 s is over"); }, 5))
      << parent.ErrSoFar();
  EXPECT_TRUE(Eventually([&] { return RunOn(machine, {"-q", "--no-wait", "--", "true"}).exit_code == 0; }, 20))
      << "the lease ended with it";
}

}  // namespace
}  // namespace gpulane::test
