// The join of NVML's processes with the live leases (lease/occupancy.h), over a fake process table:
// who owns each GPU process, what is foreign, what is unknown, how nested jobs see their parent.
#include "lease/decision_inputs.h"
#include "lease/occupancy.h"
#include "support/units.h"

#include <gtest/gtest.h>

#include <map>

namespace gpulane::lease {
namespace {

// A process tree given by hand: pid -> (parent, process group, owner).
class FakeProcesses : public ProcessTable {
 public:
  void Add(std::uint32_t pid, std::uint32_t ppid, std::uint32_t pgid, std::string user = "alice",
           std::string cmdline = "python train.py") {
    links_[pid] = {ppid, pgid, pgid};
    users_[pid] = std::move(user);
    cmdlines_[pid] = std::move(cmdline);
  }
  void End(std::uint32_t pid) { links_.erase(pid); }
  std::optional<ProcessInfo> Lookup(std::uint32_t pid) override {
    if (!links_.count(pid)) return std::nullopt;
    const std::string& cmdline = cmdlines_[pid];
    return ProcessInfo{UidOf(users_[pid]), users_[pid], cmdline.substr(0, cmdline.find(' ')), cmdline};
  }
  static std::uint32_t UidOf(const std::string& user) { return user == "root" ? 0 : user == "bob" ? 1001 : 1000; }
  std::optional<ProcessLinks> Links(std::uint32_t pid) override {
    auto it = links_.find(pid);
    if (it == links_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::uint32_t, ProcessLinks> links_;
  std::map<std::uint32_t, std::string> users_;
  std::map<std::uint32_t, std::string> cmdlines_;
};

std::string Uuid(unsigned i) { return "GPU-" + std::to_string(i) + "0000000-0000-0000-0000-000000000000"; }

GpuSnapshot OccupancyGpus(unsigned n) {
  GpuSnapshot s;
  for (unsigned i = 0; i < n; ++i) {
    GpuDevice d;
    d.pci_index = d.nvml_index = i;
    d.uuid = Uuid(i);
    d.pci_bus_id = "00000000:0" + std::to_string(i) + ":00.0";
    d.memory_total_bytes = 80 * kGiB;
    d.memory_free_bytes = 70 * kGiB;
    d.processes = std::vector<GpuProcess>{};
    s.devices.push_back(d);
  }
  return s;
}

void RunOn(GpuSnapshot& s, unsigned gpu, std::uint32_t pid, std::uint64_t used = 1 * kGiB) {
  GpuProcess p;
  p.pid = pid;
  p.used_memory_bytes = used;
  s.devices[gpu].processes->push_back(p);
}

// alice's lease whose file names supervisor `holder`, who also holds its lock.
LeaseRecord Lease(std::string job, pid_t holder, std::vector<unsigned> gpus, std::optional<std::uint64_t> mem = {}) {
  LeaseRecord l;
  l.job_id = job;
  l.uid = 1000;
  l.user = "alice";
  l.pid = holder;
  l.holder = holder;
  l.name = job + ".00000000.lease";
  for (unsigned g : gpus) l.gpus.push_back({Uuid(g), mem});
  return l;
}

TEST(Occupancy, AJobsProcessOnItsLeasedGpuIsItsOwnAndElsewhereForeign) {
  FakeProcesses procs;
  procs.Add(100, 1, 100);  // the job's supervisor (gpulane run)
  procs.Add(101, 100, 101);  // the job
  GpuSnapshot s = OccupancyGpus(2);
  RunOn(s, 1, 101);
  RunOn(s, 0, 101);  // the same process also touched GPU 0
  AnnotateProcesses(s, procs);
  Occupancy o = BuildOccupancy(s, {Lease("r100", 100, {1})}, procs);
  EXPECT_TRUE(o.gpus[1].foreign.empty()) << "on GPU 1, which job r100 leased, it is the job's own";
  EXPECT_EQ(o.gpus[1].exclusive_holder, "alice (job r100)");
  ASSERT_EQ(o.gpus[0].foreign.size(), 1u);
  EXPECT_EQ(o.gpus[0].foreign[0], "alice's python (pid 101) of job r100, which did not lease this GPU");
  ASSERT_EQ(o.strays.size(), 1u);
  EXPECT_EQ(o.strays[0].gpu, 0u);
  EXPECT_EQ(o.strays[0].pid, 101u);
  EXPECT_EQ(o.strays[0].lease, "r100.00000000.lease");
}

TEST(Occupancy, TheCallersOwnProcessOutsideAnyLeaseIsForeign) {
  FakeProcesses procs;
  procs.Add(200, 1, 200, "alice");  // alice's notebook, started without gpulane
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 200);
  AnnotateProcesses(s, procs);
  Occupancy o = BuildOccupancy(s, {}, procs);
  ASSERT_EQ(o.gpus[0].foreign.size(), 1u);
  EXPECT_EQ(o.gpus[0].foreign[0], "alice's python (pid 200)");
  EXPECT_TRUE(o.gpus[0].has_context);
}

TEST(Occupancy, AProcessThatEndedSinceTheSnapshotFreesItsMemory) {
  FakeProcesses procs;
  procs.Add(300, 1, 300);
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 300, 10 * kGiB);
  AnnotateProcesses(s, procs);  // seen alive
  procs.End(300);               // and gone before the decision
  Occupancy o = BuildOccupancy(s, {}, procs);
  EXPECT_TRUE(o.gpus[0].foreign.empty());
  EXPECT_EQ(o.gpus[0].free_bytes, 80 * kGiB);
}

TEST(Occupancy, APidNeverSeenIsAnotherNamespacesProcessUnlessThisCallerSawItAliveBefore) {
  FakeProcesses procs;
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 400);
  AnnotateProcesses(s, procs);
  EXPECT_EQ(BuildOccupancy(s, {}, procs).gpus[0].foreign.size(), 1u) << "a container's process: foreign";
  const std::set<std::uint32_t> seen_alive = {400};
  Occupancy o = BuildOccupancy(s, {}, procs, {nullptr, &seen_alive});
  EXPECT_TRUE(o.gpus[0].foreign.empty()) << "NVML lagging a process this waiter saw alive earlier: it has ended";
}

// Inside a container NVML reports the host's pids: a job's own processes are not visible here. On
// a GPU whose leases show no visible process, such a pid is counted as theirs within what they
// declared, unverified and said so; beyond it, or beside a lease whose processes are visible, foreign.
TEST(Occupancy, AnInvisiblePidIsCountedUnverifiedAsTheLeaseWhoseOwnProcessesAreInvisibleToo) {
  FakeProcesses procs;
  procs.Add(700, 1, 700);  // the first --mem job's supervisor: its job's pid on NVML is a host pid
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 4190001, 18 * kGiB);
  AnnotateProcesses(s, procs);
  const LeaseRecord lease = Lease("r700", 700, {0}, 20 * kGiB);
  Occupancy o = BuildOccupancy(s, {lease}, procs);
  EXPECT_TRUE(o.gpus[0].foreign.empty()) << o.gpus[0].foreign.front();
  ASSERT_EQ(o.gpus[0].unverified.size(), 1u);
  EXPECT_EQ(o.gpus[0].unverified[0],
            "pid 4190001 (not visible here), counted as job r700's (its own processes are not visible here either)");
  EXPECT_EQ(o.gpus[0].unallocated_reservation_bytes, 2 * kGiB) << "its memory counts against the declaration";
  ASSERT_EQ(o.outside.size(), 1u);
  EXPECT_EQ(o.outside[0].counted_as, lease.name);
  EXPECT_FALSE(o.outside[0].visible);

  RunOn(s, 0, 4190002, 30 * kGiB);  // more than the lease declared: foreign
  o = BuildOccupancy(s, {lease}, procs);
  ASSERT_EQ(o.gpus[0].foreign.size(), 1u);
  EXPECT_EQ(o.gpus[0].foreign[0], "pid 4190002 (not visible here)");
  EXPECT_EQ(o.outside.back().counted_as, "");

  procs.Add(701, 700, 701);  // the job's own process is visible after all: the unknown pids are not its
  RunOn(s, 0, 701);
  AnnotateProcesses(s, procs);
  o = BuildOccupancy(s, {lease}, procs);
  EXPECT_EQ(o.gpus[0].foreign.size(), 2u);
  EXPECT_TRUE(o.gpus[0].unverified.empty());
  EXPECT_EQ(BuildOccupancy(s, {}, procs).gpus[0].foreign.size(), 3u) << "no lease: all foreign, as before";
}

TEST(Occupancy, UnreportedProcessesAndMemoryStayUnknown) {
  FakeProcesses procs;
  GpuSnapshot s = OccupancyGpus(1);
  s.devices[0].processes.reset();
  s.devices[0].memory_free_bytes.reset();
  s.devices[0].memory_total_bytes.reset();
  Occupancy o = BuildOccupancy(s, {}, procs);
  EXPECT_FALSE(o.gpus[0].processes_known);
  EXPECT_FALSE(o.gpus[0].free_bytes.has_value()) << "unknown, not 0";
  EXPECT_FALSE(o.gpus[0].total_bytes.has_value());
}

TEST(Occupancy, ComputeModesAndMig) {
  FakeProcesses procs;
  GpuSnapshot s = OccupancyGpus(4);
  s.devices[0].compute_mode = ComputeMode::kExclusiveProcess;
  s.devices[1].compute_mode = ComputeMode::kProhibited;
  s.devices[2].mig_enabled = true;
  s.devices[3].error = "NVML_ERROR_GPU_IS_LOST";
  Occupancy o = BuildOccupancy(s, {}, procs);
  EXPECT_TRUE(o.gpus[0].one_context_only);
  EXPECT_TRUE(o.gpus[0].usable);
  EXPECT_FALSE(o.gpus[1].usable);
  EXPECT_EQ(o.gpus[1].unusable_reason, "compute mode PROHIBITED");
  EXPECT_EQ(o.gpus[2].unusable_reason, "MIG mode on");
  EXPECT_EQ(o.gpus[3].unusable_reason, "failed (NVML_ERROR_GPU_IS_LOST)");
}

TEST(Occupancy, ASharedLeaseReservesWhatItDeclaredButHasNotAllocated) {
  FakeProcesses procs;
  procs.Add(500, 1, 500);
  procs.Add(501, 500, 501);
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 501, 10 * kGiB);
  AnnotateProcesses(s, procs);
  Occupancy o = BuildOccupancy(s, {Lease("12", 500, {0}, 30 * kGiB)}, procs);
  EXPECT_EQ(o.gpus[0].shared_leases, 1u);
  EXPECT_EQ(o.gpus[0].unallocated_reservation_bytes, 20 * kGiB);
  EXPECT_TRUE(o.gpus[0].foreign.empty());
}

// Backfill plans against when a leased GPU is free again: the latest end of its leases, known
// only when every one of them has a time limit.
TEST(Occupancy, ALeasedGpuIsBusyUntilItsLatestLeaseEndsWhenEveryLeaseHasATimeLimit) {
  FakeProcesses procs;
  GpuSnapshot s = OccupancyGpus(3);
  LeaseRecord a = Lease("12", 500, {0, 1}, 10 * kGiB), b = Lease("13", 501, {0}, 10 * kGiB), c = Lease("14", 502, {1}, 10 * kGiB);
  a.started_s = 1000;
  a.time_limit_s = 60;
  b.started_s = 1010;
  b.time_limit_s = 100;
  c.started_s = 1000;  // no time limit
  Occupancy o = BuildOccupancy(s, {a, b, c}, procs);
  EXPECT_EQ(o.gpus[0].busy_until_s, 1110.0) << "the later of 1060 and 1110";
  EXPECT_FALSE(o.gpus[1].busy_until_s) << "job 14 has no time limit: unknown";
  EXPECT_FALSE(o.gpus[2].busy_until_s) << "not leased";
}

// A pipeline job (lease of its supervisor 600) runs a step through gpulane run (lease of 602).
TEST(Occupancy, ANestedJobOwnsItsProcessesAndItsParentHoldsNothingAgainstItsSteps) {
  FakeProcesses procs;
  procs.Add(600, 1, 600);    // the pipeline's supervisor
  procs.Add(601, 600, 601);  // the pipeline script
  procs.Add(602, 601, 601);  // `gpulane run` of a step, inside it
  procs.Add(603, 602, 603);  // the step
  GpuSnapshot s = OccupancyGpus(2);
  RunOn(s, 0, 603);
  AnnotateProcesses(s, procs);
  std::vector<LeaseRecord> leases = {Lease("7", 600, {0, 1}), Lease("r602", 602, {0})};
  leases[1].parent = leases[0].name;
  Occupancy outside = BuildOccupancy(s, leases, procs);
  EXPECT_TRUE(outside.gpus[0].foreign.empty()) << "the step's process belongs to the step's lease, its closest";
  EXPECT_TRUE(outside.gpus[1].exclusive_holder.has_value()) << "for everyone else both GPUs are job 7's";

  auto view = ViewOfLine(leases, {}, s, procs, leases[0].name);
  ASSERT_TRUE(view.ok());
  EXPECT_FALSE(view->occupancy.gpus[1].exclusive_holder.has_value()) << "inside job 7, GPU 1 is free for a step";
  EXPECT_EQ(view->occupancy.gpus[0].exclusive_holder, "alice (job r602)") << "GPU 0 runs the other step";
  EXPECT_EQ(WithinParent({Uuid(0), Uuid(1)}, view->parent), (std::vector<std::string>{Uuid(0), Uuid(1)}));
  EXPECT_EQ(WithinParent({Uuid(1)}, &leases[1]), std::vector<std::string>{}) << "outside the parent's GPUs";
  EXPECT_FALSE(ViewOfLine(leases, {}, s, procs, "gone.lease").ok()) << "a parent that ended";
}

TEST(Occupancy, FindParentLeaseNeedsAnAncestorNotJustTheJobId) {
  FakeProcesses procs;
  procs.Add(700, 1, 700);
  procs.Add(701, 700, 701);
  procs.Add(800, 1, 800);
  std::vector<LeaseRecord> leases = {Lease("7", 700, {0})};
  EXPECT_EQ(FindParentLease(leases, std::string("7"), 701, procs), &leases[0]);
  EXPECT_EQ(FindParentLease(leases, std::string("7"), 800, procs), nullptr) << "job 7 is no ancestor of 800";
  EXPECT_EQ(FindParentLease(leases, std::nullopt, 701, procs), nullptr);
}

// Forged lease pid (issue 9, item 9): bob's lease file names a common ancestor of alice's GPU
// process (her login shell's parent, say sshd). It must not make alice's process bob's.
TEST(Occupancy, ALeaseOwnsOnlyItsOwnersProcessesWhateverPidItNames) {
  FakeProcesses procs;
  procs.Add(900, 1, 900, "root");    // sshd: everybody's ancestor
  procs.Add(901, 900, 901, "alice");  // alice's python, started without gpulane
  procs.Add(950, 900, 950, "bob");    // bob's process holding his lease's lock
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 901);
  AnnotateProcesses(s, procs);
  LeaseRecord forged = Lease("r950", 900, {0});
  forged.uid = 1001;
  forged.user = "bob";
  forged.holder = 950;
  Occupancy o = BuildOccupancy(s, {forged}, procs);
  ASSERT_EQ(o.gpus[0].foreign.size(), 1u) << "alice's process is foreign to bob's lease";
  EXPECT_EQ(o.gpus[0].foreign[0], "alice's python (pid 901)");

  forged.holder = 900;  // even had it the lock's holder for its pid (root's sshd)
  o = BuildOccupancy(s, {forged}, procs);
  EXPECT_EQ(o.gpus[0].foreign.size(), 1u) << "a lease owns only its owner's processes";
  forged.pid = 950, forged.holder = 950, forged.pgid = 901;  // or alice's process group
  o = BuildOccupancy(s, {forged}, procs);
  EXPECT_EQ(o.gpus[0].foreign.size(), 1u) << "another user's process group is not the lease's job";
}

// The supervisor a lease's file names counts only when it is the process holding the file's lock
// or one of its descendants; otherwise the lease owns its job's process group alone.
TEST(Occupancy, ALeasesPidCountsOnlyWhenTheLocksHolderVouchesForIt) {
  FakeProcesses procs;
  procs.Add(1100, 1, 1100);     // alice's shell
  procs.Add(1101, 1100, 1101);  // alice's notebook, started without gpulane
  procs.Add(1200, 1, 1200);     // alice's gpulane run, holding the lease's lock
  procs.Add(1201, 1200, 1201);  // its job
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 1101);
  RunOn(s, 0, 1201);
  AnnotateProcesses(s, procs);
  LeaseRecord lease = Lease("r1200", 1200, {0});
  EXPECT_TRUE(BuildOccupancy(s, {lease}, procs).gpus[0].foreign.size() == 1u) << "the notebook is foreign, the job not";
  lease.pid = 1100;  // the file names the shell: no descendant of the lock's holder
  Occupancy o = BuildOccupancy(s, {lease}, procs);
  EXPECT_EQ(o.gpus[0].foreign.size(), 2u) << "an unconfirmed pid owns nothing, not even the job";
  lease.pgid = 1201;
  o = BuildOccupancy(s, {lease}, procs);
  ASSERT_EQ(o.gpus[0].foreign.size(), 1u) << "the job's process group still does";
  EXPECT_EQ(o.gpus[0].foreign[0], "alice's python (pid 1101)");
  lease.pid = 1201, lease.pgid = 0;  // a descendant of the holder: the holder vouches for it
  EXPECT_EQ(BuildOccupancy(s, {lease}, procs).gpus[0].foreign.size(), 1u);
  lease.pid = 1200, lease.holder = 0;  // /proc/locks does not show the holder (another PID namespace)
  EXPECT_EQ(BuildOccupancy(s, {lease}, procs).gpus[0].foreign.size(), 2u);
}

// `gpulane _lease` (the Python package's lease()) holds a lease for the process that started it:
// the file names the holder's parent, and that parent and its other children (a notebook kernel,
// its data-loader workers) are the job. Only a holder running `gpulane _lease` vouches for its
// parent, and only for its owner's process.
TEST(Occupancy, AGpulaneLeaseHolderVouchesForItsParentOnly) {
  FakeProcesses procs;
  procs.Add(1300, 1, 1300);                                  // alice's notebook kernel
  procs.Add(1301, 1300, 1300);                               // its data-loader worker
  procs.Add(1302, 1300, 1302, "alice", "gpulane _lease -g 1");  // the lease's holder
  procs.Add(1400, 1, 1400);                                  // alice's other python
  GpuSnapshot s = OccupancyGpus(1);
  RunOn(s, 0, 1300);
  RunOn(s, 0, 1301);
  RunOn(s, 0, 1400);
  AnnotateProcesses(s, procs);
  LeaseRecord lease = Lease("p1300", 1300, {0});
  lease.holder = 1302;
  Occupancy o = BuildOccupancy(s, {lease}, procs);
  ASSERT_EQ(o.gpus[0].foreign.size(), 1u) << "the kernel and its worker are the lease's";
  EXPECT_EQ(o.gpus[0].foreign[0], "alice's python (pid 1400)");
  lease.pid = 1, lease.job_id = "p1";  // naming init (no parent of the holder)
  EXPECT_EQ(BuildOccupancy(s, {lease}, procs).gpus[0].foreign.size(), 3u);

  procs.Add(1302, 1300, 1302, "alice", "gpulane _leasex");  // not `_lease`: vouches for no parent
  lease.pid = 1300;
  EXPECT_EQ(BuildOccupancy(s, {lease}, procs).gpus[0].foreign.size(), 3u);
  procs.Add(1302, 1300, 1302, "alice", "python fake_lease.py _lease");
  EXPECT_EQ(BuildOccupancy(s, {lease}, procs).gpus[0].foreign.size(), 3u) << "only gpulane's own command";
  procs.Add(1300, 1, 1300, "bob");  // the parent is another user's: never the lease's
  procs.Add(1302, 1300, 1302, "alice", "gpulane _lease -g 1");
  AnnotateProcesses(s, procs);
  EXPECT_EQ(BuildOccupancy(s, {lease}, procs).gpus[0].foreign.size(), 3u);
}

TEST(Occupancy, FindParentLeaseNeedsTheCallersOwnLeaseHeldByAnAncestor) {
  FakeProcesses procs;
  procs.Add(700, 1, 700);
  procs.Add(701, 700, 701);
  procs.Add(702, 700, 702, "bob");  // a process of bob's below alice's supervisor (su)
  std::vector<LeaseRecord> leases = {Lease("7", 700, {0})};
  EXPECT_EQ(FindParentLease(leases, std::string("7"), 701, procs), &leases[0]);
  EXPECT_EQ(FindParentLease(leases, std::string("7"), 702, procs), nullptr) << "alice's job is not bob's";
  leases[0].holder = 0;
  EXPECT_EQ(FindParentLease(leases, std::string("7"), 701, procs), nullptr) << "no lock holder vouches for its pid";
}

TEST(Occupancy, TicketsOfANestedLineAreOnlyThoseOfTheSameParent) {
  TicketRecord top, nested;
  top.id = "w1";
  nested.id = "w2";
  nested.parent = "7.00000000.lease";
  EXPECT_EQ(TicketsOfLine({top, nested}, "").size(), 1u);
  EXPECT_EQ(TicketsOfLine({top, nested}, "").front().id, "w1");
  EXPECT_EQ(TicketsOfLine({top, nested}, "7.00000000.lease").front().id, "w2");
}

// The one builder of a decision's inputs (lease/decision_inputs.h), which pick, the waiter and a
// preemptible holder share: in the machine's line every user in line (and pick's newcomer) gets
// their [limits] max_gpus and the GPUs their leases hold; inside a job's line nobody does; a free
// GPU is free since the caller first saw it. Dropping the user limits from the builder let `run`
// and queued jobs past limits.max_gpus without any other test noticing.
TEST(DecisionInputs, TheMachinesLineCountsEveryUsersLimitAndANestedLineNone) {
  FakeProcesses procs;
  procs.Add(10, 1, 10);
  GpuSnapshot snap = OccupancyGpus(2);
  const std::vector<LeaseRecord> leases = {Lease("a1", 10, {0})};
  TicketRecord bob;
  bob.request.uid = 1001;
  bob.request.user = "bob";
  WaitRequest w;
  w.limits_config.limits.max_gpus = 1;
  std::map<std::string, double> seen;
  auto in = GatherDecisionInputs(leases, {bob}, snap, procs, w, 100, seen, {"", nullptr, 1002u, nullptr});
  ASSERT_TRUE(in.ok()) << in.error().message;
  EXPECT_EQ(in->limits.now_s, 100);
  ASSERT_EQ(in->limits.gpus_in_use_by_uid.size(), 1u) << "the users' GPUs in use are counted";
  ASSERT_EQ(in->limits.max_gpus_by_uid.size(), 2u) << "bob's and the newcomer's limits are given";
  EXPECT_EQ(in->limits.gpus_in_use_by_uid.at(1000), 1u) << "alice's lease holds GPU 0";
  EXPECT_EQ(in->limits.max_gpus_by_uid.at(1001), 1u) << "bob, in line";
  EXPECT_EQ(in->limits.max_gpus_by_uid.at(1002), 1u) << "the newcomer pick asks for";
  ASSERT_EQ(in->view.tickets.size(), 1u);
  EXPECT_EQ(in->view.occupancy.gpus[1].free_since_s, 100) << "GPU 1 is free, seen so first now";
  bob.parent = leases[0].name;  // a step inside alice's job: its own line, no user limits
  auto nested = GatherDecisionInputs(leases, {bob}, snap, procs, w, 100, seen, {leases[0].name, nullptr, 1002u, nullptr});
  ASSERT_TRUE(nested.ok()) << nested.error().message;
  EXPECT_TRUE(nested->limits.max_gpus_by_uid.empty());
  EXPECT_EQ(nested->view.tickets.size(), 1u);
}

}  // namespace
}  // namespace gpulane::lease
