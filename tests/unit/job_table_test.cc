// The daemon's job table (daemon::JobTable) on a :memory: store, a temporary jobs folder, a
// FakeClock and a launcher that records: recovery after a restart (adopt, fail, collect, requeue
// after the grace, never requeue a cancelled job), launches and what supervisors' status files say.
// A test plays the supervisor: it holds the job's lock with flock and writes its status file.
// The table as the one owner of job state (job_table.h's invariants): cancels, holds, releases and
// idle cancels are its events, and every signal to a supervisor goes through the launcher, which
// records it here.
#include "daemon/job_table.h"
#include "os/file_system.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>

#include "daemon/job_files.h"
#include "support/harness.h"
#include "support/recording_launcher.h"
#include "util/clock.h"

namespace gpulane::daemon {
namespace {

namespace fs = std::filesystem;
using store::Job;
using store::JobState;
using Ids = std::vector<std::int64_t>;

constexpr double kGraceS = 10;

class JobTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpulane-job-table-test-XXXXXX";
    dir_ = mkdtemp(dir);
    fs::create_directories(jobs_dir());
    auto store = store::JobStore::Open(":memory:");
    ASSERT_TRUE(store) << store.error().message;
    store_ = std::move(store).value();
  }
  void TearDown() override {
    for (auto& [id, fd] : locks_) close(fd);
    fs::remove_all(dir_);
  }

  std::string jobs_dir() const { return (dir_ / "jobs").string(); }
  JobFiles Files(std::int64_t id) { return JobFiles(files_, jobs_dir(), id); }

  // The table, built on first use (after the test has prepared the store: a restarted daemon).
  JobTable& Table() {
    if (!table_)
      table_ = std::make_unique<JobTable>(*store_, jobs_dir(), clock_, files_, launcher_, limits_,
                                          [this](const std::string& line) {
                                            log_.push_back(line);
                                            if (on_log_) on_log_(line);
                                          });
    return *table_;
  }

  // Stores a job in `state` (as a daemon before the restart left it) and returns its id.
  std::int64_t Stored(JobState state, std::vector<std::int64_t> after_ok = {}, std::vector<std::int64_t> after_any = {},
                      int priority = 0) {
    std::vector<Job> jobs = {MakeJob(after_ok, after_any, priority)};
    auto ids = store_->Insert(jobs, false);
    EXPECT_TRUE(ids) << ids.error().message;
    jobs[0].state = state;
    EXPECT_TRUE(store_->Update({&jobs[0]}).ok());
    return jobs[0].id;
  }

  // Stores an array of tasks in these states; returns the array's id (its first task's).
  std::int64_t StoredArray(const std::vector<JobState>& states) {
    std::vector<Job> jobs(states.size(), MakeJob({}, {}, 0));
    for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i].array_index = static_cast<int>(i);
    auto ids = store_->Insert(jobs, true);
    EXPECT_TRUE(ids) << ids.error().message;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].state = states[i];
      EXPECT_TRUE(store_->Update({&jobs[i]}).ok());
    }
    return jobs[0].id;
  }

  // Stores a completed job of alice that held 4 GPUs from `start_ago_s` to `end_ago_s` seconds
  // before now (as a daemon before a restart stored it: fair share and the GPU-hours limit read it).
  void StoreEndedFourGpuJob(double start_ago_s, double end_ago_s) {
    Job used = MakeJob({}, {}, 0);
    used.spec.request.count = 4;
    std::vector<Job> ran = {used};
    ASSERT_TRUE(store_->Insert(ran, false));
    ran[0].state = JobState::kCompleted;
    ran[0].start_time = clock_.WallS() - start_ago_s;
    ran[0].end_time = clock_.WallS() - end_ago_s;
    ran[0].gpu_uuids = {"GPU-1", "GPU-2", "GPU-3", "GPU-4"};
    ASSERT_TRUE(store_->Update({&ran[0]}).ok());
  }

  static Job MakeJob(std::vector<std::int64_t> after_ok, std::vector<std::int64_t> after_any, int priority) {
    Job job;
    job.spec.request.uid = 1000;
    job.gid = 1000;
    job.spec.request.user = "alice";
    job.spec.argv = {"true"};
    job.spec.cwd = "/tmp";
    std::vector<sched::JobRef> ok, any;
    for (auto id : after_ok) ok.push_back({id, std::nullopt});
    for (auto id : after_any) any.push_back({id, std::nullopt});
    job.spec.after_ok = ok;
    job.spec.after_any = any;
    job.spec.request.priority = priority;
    job.spec.request.submit_time_s = 1.0;
    return job;
  }

  // The test as the job's supervisor: takes the job's lock (as `gpulane _supervise` does) ...
  void HoldLock(std::int64_t id) {
    int fd = open(Files(id).lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
    locks_[id] = fd;
  }
  void ReleaseLock(std::int64_t id) {
    close(locks_.at(id));
    locks_.erase(id);
  }
  // ... and reports.
  void Report(std::int64_t id, SupervisorStatus status) { ASSERT_TRUE(Files(id).WriteStatus(status).ok()); }

  static SupervisorStatus Running() {
    SupervisorStatus s;
    s.phase = "running";
    s.pid = static_cast<pid_t>(test::UnusedPid());  // no such process: a cancel's SIGTERM goes nowhere
    s.start_time = 1'700'000'100.0;
    s.gpu_uuids = {"GPU-1"};
    return s;
  }
  // "running" from a supervisor that marks its job's exec (job_files.h).
  static SupervisorStatus RunningMarked() {
    SupervisorStatus s = Running();
    s.marks_exec = true;
    return s;
  }
  static SupervisorStatus Done(std::optional<int> exit_code) {
    SupervisorStatus s = Running();
    s.phase = "done";
    s.exit_code = exit_code;
    s.end_time = 1'700'000'200.0;
    return s;
  }
  static SupervisorStatus Waiting(const std::string& reason) {
    SupervisorStatus s;
    s.pid = static_cast<pid_t>(test::UnusedPid());
    s.reason = reason;
    return s;
  }

  // The job as stored.
  Job StoredJob(std::int64_t id) {
    auto job = store_->Get(id);
    EXPECT_TRUE(job && *job) << "job " << id;
    return job && *job ? **job : Job{};
  }
  std::string StoredState(std::int64_t id) { return store::StateName(StoredJob(id).state); }
  // The job as the table has it ("" when it is not active).
  std::string TableState(std::int64_t id) {
    auto it = Table().active().find(id);
    return it == Table().active().end() ? "" : store::StateName(it->second.state);
  }
  bool Logged(const std::string& part) const {
    for (const auto& line : log_)
      if (line.find(part) != std::string::npos) return true;
    return false;
  }
  // One daemon tick, then a scheduling pass and the store updates, as the daemon's loop does.
  void Turn() {
    Table().CheckSupervisors();
    Table().LaunchEligible();
    Table().FlushDirty();
  }

  fs::path dir_;
  std::unique_ptr<store::JobStore> store_;
  FakeClock clock_;
  os::SystemFileSystem files_;  ///< the job files: real ones in dir_
  test::RecordingLauncher launcher_;
  JobTableLimits limits_{kGraceS, 4};
  std::vector<std::string> log_;
  std::function<void(const std::string& line)> on_log_;  ///< a test's check of what holds when a line is logged
  std::map<std::int64_t, int> locks_;
  std::unique_ptr<JobTable> table_;
};

// ---- recovery ---------------------------------------------------------------------------------

TEST_F(JobTableTest, RecoveryAdoptsARunningJobWhoseSupervisorHoldsItsLock) {
  const std::int64_t id = Stored(JobState::kLaunching);
  HoldLock(id);
  Report(id, Running());
  auto handed = Table().Recover();
  ASSERT_TRUE(handed) << handed.error().message;
  EXPECT_EQ(*handed, 1u);
  EXPECT_EQ(TableState(id), "running");
  Job stored = StoredJob(id);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "running") << "stored at recovery";
  EXPECT_EQ(stored.start_time, 1'700'000'100.0);
  EXPECT_EQ(stored.gpu_uuids, std::vector<std::string>{"GPU-1"});
  EXPECT_EQ(Table().active().at(id).supervisor_pid, Running().pid);
  // It stays running however long it runs, and is never started again.
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(3600);
    Turn();
  }
  EXPECT_EQ(TableState(id), "running");
  EXPECT_TRUE(launcher_.started.empty());
}

// The tick read every launched or running job's lock and status file: with thousands of CPU-only
// jobs running (launched past max_waiting) that held the loop each tick. Now a slice a tick,
// round robin: every job is still read, a few ticks apart.
TEST_F(JobTableTest, EachTickReadsASliceOfTheSupervisorsRoundRobin) {
  limits_.supervisor_checks_per_tick = 3;
  Ids ids;
  for (int i = 0; i < 7; ++i) {
    ids.push_back(Stored(JobState::kLaunching));
    HoldLock(ids.back());
    Report(ids.back(), Running());
  }
  auto handed = Table().Recover();
  ASSERT_TRUE(handed) << handed.error().message;
  for (auto id : ids) ASSERT_EQ(TableState(id), "running");
  for (auto id : ids) Report(id, Done(0));  // all ended: each is collected when its slice is read
  auto collected = [&] {
    Ids out;
    for (auto id : ids)
      if (TableState(id).empty()) out.push_back(id);
    return out;
  };
  Table().CheckSupervisors();
  EXPECT_EQ(collected(), Ids(ids.begin(), ids.begin() + 3));
  Table().CheckSupervisors();
  EXPECT_EQ(collected(), Ids(ids.begin(), ids.begin() + 6));
  Table().CheckSupervisors();
  EXPECT_EQ(collected(), ids);
  for (auto id : ids) EXPECT_EQ(StoredState(id), "completed");
}

TEST_F(JobTableTest, RecoveryFailsAJobWhoseSupervisorDiedAfterRunningAndNeverStartsItAgain) {
  const std::int64_t id = Stored(JobState::kRunning);
  Report(id, Running());  // no lock: its supervisor is gone
  ASSERT_TRUE(Table().Recover());
  EXPECT_EQ(TableState(id), "") << "finished";
  Job stored = StoredJob(id);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "failed");
  EXPECT_EQ(stored.reason, "its supervisor ended without recording the job's end");
  EXPECT_EQ(stored.end_time, clock_.WallS()) << "ended when the daemon found out, on its clock";
  EXPECT_FALSE(fs::exists(Files(id).status_path())) << "its files are removed";
  clock_.Advance(kGraceS * 10);
  Turn();
  EXPECT_TRUE(launcher_.started.empty());
  EXPECT_EQ(StoredState(id), "failed");
}

TEST_F(JobTableTest, RecoveryCollectsJobsThatEndedWhileTheDaemonWasDown) {
  const std::int64_t ok = Stored(JobState::kRunning), bad = Stored(JobState::kRunning), cancelled = Stored(JobState::kLaunching),
                     late = Stored(JobState::kRunning);
  Report(ok, Done(0));
  Report(bad, Done(3));
  SupervisorStatus interrupted = Done(std::nullopt);
  interrupted.interrupted = true;
  interrupted.reason = "cancelled while waiting for GPUs";
  Report(cancelled, interrupted);
  SupervisorStatus timed_out = Done(143);
  timed_out.timed_out = true;
  Report(late, timed_out);
  auto handed = Table().Recover();
  ASSERT_TRUE(handed);
  EXPECT_EQ(*handed, 4u);
  EXPECT_TRUE(Table().active().empty());
  Job a = StoredJob(ok), b = StoredJob(bad);
  EXPECT_EQ(std::string(store::StateName(a.state)), "completed");
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_EQ(std::string(store::StateName(b.state)), "failed");
  EXPECT_EQ(b.exit_code, 3);
  EXPECT_EQ(b.end_time, 1'700'000'200.0) << "the end its supervisor recorded";
  EXPECT_EQ(b.start_time, 1'700'000'100.0);
  EXPECT_EQ(StoredState(cancelled), "cancelled");
  EXPECT_EQ(StoredState(late), "timeout");
  EXPECT_EQ(StoredJob(late).exit_code, 143);
  EXPECT_TRUE(Logged(std::to_string(bad) + " (alice) failed with exit code 3"));
  Turn();
  EXPECT_TRUE(launcher_.started.empty());
}

TEST_F(JobTableTest, RecoveryRequeuesALaunchWhoseSupervisorNeverTookItsLockExactlyAfterTheGrace) {
  const std::int64_t id = Stored(JobState::kLaunching);  // marked, then the daemon died before starting it
  ASSERT_TRUE(Table().Recover());
  EXPECT_EQ(TableState(id), "launching");
  clock_.Advance(kGraceS - 0.5);
  Turn();
  EXPECT_EQ(TableState(id), "launching") << "not before the grace";
  EXPECT_TRUE(launcher_.started.empty());
  // Exactly at the grace: back in line, and started again in the same turn.
  launcher_.on_start = [&](std::int64_t started) {
    EXPECT_EQ(StoredState(started), "launching") << "stored as launching before its supervisor starts";
    EXPECT_TRUE(fs::exists(Files(started).spec_path())) << "its spec is written first";
  };
  clock_.Advance(0.5);
  Table().CheckSupervisors();
  EXPECT_EQ(TableState(id), "pending");
  EXPECT_EQ(Table().active().at(id).reason, "requeued: its supervisor ended before the job started");
  EXPECT_TRUE(Table().TakeScheduleNeeded());
  Table().FlushDirty();
  EXPECT_EQ(StoredState(id), "pending");
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, Ids{id});
  EXPECT_EQ(TableState(id), "launching");
}

TEST_F(JobTableTest, ALaunchThatNeverTookItsLockIsStartedAgainAfterTheGraceEachTime) {
  const std::int64_t id = Stored(JobState::kPending);
  ASSERT_TRUE(Table().Recover());
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, Ids{id});
  clock_.Advance(kGraceS - 0.5);
  Turn();
  EXPECT_EQ(launcher_.started, Ids{id});
  clock_.Advance(0.5);
  Turn();
  EXPECT_EQ(launcher_.started, (Ids{id, id}));
  // Once its supervisor holds the lock, it waits for GPUs as long as it takes.
  HoldLock(id);
  Report(id, Waiting("waiting, 1st in line: GPU0: in use"));
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(kGraceS);
    Turn();
  }
  EXPECT_EQ(launcher_.started, (Ids{id, id}));
  EXPECT_EQ(TableState(id), "launching");
  EXPECT_EQ(Table().active().at(id).reason, "waiting, 1st in line: GPU0: in use");
}

TEST_F(JobTableTest, ACancelledLaunchIsNeverRequeued) {
  const std::int64_t silent = Stored(JobState::kLaunching), reported = Stored(JobState::kLaunching);
  Report(reported, Waiting("waiting"));  // reported, then its supervisor went away: gone for sure
  ASSERT_TRUE(Table().Recover());
  Table().CancelPart(Ids{silent, reported}, "alice");
  Table().CheckSupervisors();
  EXPECT_EQ(TableState(silent), "launching") << "its supervisor may still take the lock and see the cancel";
  EXPECT_EQ(TableState(reported), "") << "cancelled at once";
  EXPECT_EQ(StoredState(reported), "cancelled");
  clock_.Advance(kGraceS);
  Turn();
  EXPECT_EQ(TableState(silent), "");
  Job stored = StoredJob(silent);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "cancelled");
  EXPECT_EQ(stored.reason, "cancelled before it started");
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(kGraceS);
    Turn();
  }
  EXPECT_TRUE(launcher_.started.empty());
}

TEST_F(JobTableTest, AHeldSupervisorsJobIsHeldUntilReleased) {
  const std::int64_t id = Stored(JobState::kLaunching);
  ASSERT_TRUE(Table().Recover());
  SupervisorStatus held = Done(std::nullopt);
  held.held = true;
  held.interrupted = true;
  Report(id, held);
  Table().HoldPart(Ids{id}, "alice", true);
  Turn();
  EXPECT_EQ(TableState(id), "held");
  EXPECT_EQ(StoredState(id), "held");
  EXPECT_EQ(StoredJob(id).reason, fmt::format("held: left the line for GPUs, starts again after gpulane release {}", id))
      << "the WHY column names the job to release";
  EXPECT_FALSE(fs::exists(Files(id).status_path()));
  clock_.Advance(kGraceS * 2);
  Turn();
  EXPECT_TRUE(launcher_.started.empty()) << "held jobs are not started";
}

// ---- the supervisor window: a supervisor lost between recording "running" and the job's exec ----

// What the daemon does with a launched or running job whose supervisor holds no lock, for each
// state of the job's files.
TEST(LostSupervisorDecision, EachStateOfTheJobsFiles) {
  using A = LostSupervisorAction;
  SupervisorStatus waiting, running, legacy_running, done;
  waiting.marks_exec = running.marks_exec = done.marks_exec = true;
  running.phase = legacy_running.phase = "running";
  done.phase = "done";
  for (bool stored_running : {false, true}) {
    SCOPED_TRACE(stored_running ? "stored running" : "stored launching");
    EXPECT_EQ(DecideLostSupervisor(done, false, stored_running), A::kCollect);
    EXPECT_EQ(DecideLostSupervisor(done, true, stored_running), A::kCollect);
    // Recorded running, and the child never reached its exec: the command never started.
    EXPECT_EQ(DecideLostSupervisor(running, false, stored_running), A::kRequeue);
    // The child marked its exec: the command may have started, so never again.
    EXPECT_EQ(DecideLostSupervisor(running, true, stored_running), A::kFail);
    // A supervisor of an older gpulane writes no mark: its "running" counts as started.
    EXPECT_EQ(DecideLostSupervisor(legacy_running, false, stored_running), A::kFail);
    // Waiting for GPUs (or requeued already): a lost launch, given back to the line.
    EXPECT_EQ(DecideLostSupervisor(waiting, false, stored_running), A::kGrace);
    // A flushed mark whose "running" was lost (a power loss): it may have run, never again.
    EXPECT_EQ(DecideLostSupervisor(waiting, true, stored_running), A::kFail);
    EXPECT_EQ(DecideLostSupervisor(std::nullopt, true, stored_running), A::kFail);
  }
  EXPECT_EQ(DecideLostSupervisor(std::nullopt, false, false), A::kGrace) << "launched, no report yet";
  EXPECT_EQ(DecideLostSupervisor(std::nullopt, false, true), A::kFail) << "ran, and its record is gone";
}

TEST_F(JobTableTest, ASupervisorLostAfterRecordingRunningBeforeTheExecIsRequeuedOnceAndStartedAgain) {
  const std::int64_t id = Stored(JobState::kLaunching);
  HoldLock(id);
  auto mark = Files(id).OpenExecMark();  // as the supervisor does at its start: '0'
  ASSERT_TRUE(mark) << mark.error().message;
  close(*mark);
  Report(id, RunningMarked());
  ASSERT_TRUE(Table().Recover());
  EXPECT_EQ(TableState(id), "running");
  EXPECT_EQ(StoredState(id), "running");
  ReleaseLock(id);  // killed before its fork: no exec mark
  Table().CheckSupervisors();
  EXPECT_EQ(TableState(id), "pending") << "at once: no grace for a supervisor that reported and is gone";
  const Job& requeued = Table().active().at(id);
  EXPECT_EQ(requeued.reason, "requeued: its supervisor ended before the job's command started");
  EXPECT_FALSE(requeued.start_time);
  EXPECT_TRUE(requeued.gpu_uuids.empty());
  auto status = Files(id).ReadStatus();
  ASSERT_TRUE(status);
  EXPECT_EQ(status->phase, "waiting") << "the next supervisor may take the job";
  EXPECT_TRUE(Logged("requeued: its supervisor ended after recording it running"));
  Table().FlushDirty();
  EXPECT_EQ(StoredState(id), "pending");
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, Ids{id});
  // Once: further turns before the grace start nothing more.
  Turn();
  Turn();
  EXPECT_EQ(launcher_.started, Ids{id});
  EXPECT_EQ(TableState(id), "launching");
}

TEST_F(JobTableTest, ASupervisorLostAfterItsChildMarkedTheExecFailsTheJobAndNeverStartsItAgain) {
  const std::int64_t id = Stored(JobState::kRunning);
  auto mark = Files(id).OpenExecMark();
  ASSERT_TRUE(mark);
  ASSERT_EQ(pwrite(*mark, "1", 1, 0), 1);  // the child's write before its execve
  close(*mark);
  Report(id, RunningMarked());
  ASSERT_TRUE(Table().Recover());
  EXPECT_EQ(TableState(id), "");
  Job stored = StoredJob(id);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "failed");
  EXPECT_EQ(stored.reason, "its supervisor ended without recording the job's end");
  EXPECT_FALSE(fs::exists(Files(id).exec_path())) << "its files are removed, the mark too";
  clock_.Advance(kGraceS * 10);
  Turn();
  EXPECT_TRUE(launcher_.started.empty());
}

TEST_F(JobTableTest, ARequeueOfANeverStartedJobSurvivesADaemonRestartBeforeItWasStored) {
  const std::int64_t id = Stored(JobState::kRunning);
  Report(id, RunningMarked());  // and no exec mark: its command never started
  ASSERT_TRUE(Table().Recover());
  EXPECT_EQ(TableState(id), "pending");
  // Had the daemon died before storing that (Recover stored it), the store would still say
  // "running": a new daemon on such a store and the rewritten status file.
  table_.reset();
  Job row = StoredJob(id);
  row.state = JobState::kRunning;
  ASSERT_TRUE(store_->Update({&row}).ok());
  ASSERT_TRUE(Table().Recover());
  EXPECT_NE(StoredState(id), "failed") << "a launch that was lost, not a job that ran";
  clock_.Advance(kGraceS);
  Turn();
  EXPECT_EQ(launcher_.started, Ids{id}) << "requeued after the grace, as any lost launch";
  EXPECT_EQ(TableState(id), "launching");
}

TEST_F(JobTableTest, ACancelledJobWhoseSupervisorWasLostBeforeTheExecIsCancelledNotRequeued) {
  const std::int64_t id = Stored(JobState::kLaunching);
  HoldLock(id);
  Report(id, RunningMarked());
  ASSERT_TRUE(Table().Recover());
  Table().CancelPart(Ids{id}, "alice");
  ReleaseLock(id);
  Turn();
  EXPECT_EQ(TableState(id), "");
  EXPECT_EQ(StoredState(id), "cancelled");
  EXPECT_EQ(StoredJob(id).reason, "cancelled before it started");
  EXPECT_TRUE(launcher_.started.empty());
}

// ---- launches ---------------------------------------------------------------------------------

TEST_F(JobTableTest, LaunchesInLineOrderUnderTheCapCountingJobsAlreadyWaiting) {
  limits_.max_waiting = 3;
  const std::int64_t waiting = Stored(JobState::kLaunching);
  HoldLock(waiting);
  const std::int64_t low = Stored(JobState::kPending, {}, {}, -5), first = Stored(JobState::kPending),
                     second = Stored(JobState::kPending), held = Stored(JobState::kHeld);
  (void)held;
  ASSERT_TRUE(Table().Recover());
  launcher_.on_start = [&](std::int64_t started) {
    EXPECT_EQ(StoredState(started), "launching") << "stored as launching before its supervisor starts";
  };
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, (Ids{first, second}));
  EXPECT_EQ(TableState(low), "pending");
  // One of them ends: the next in line gets its place.
  Report(first, Done(0));
  Table().ImportStatus(first);
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, (Ids{first, second, low}));
}

// Held jobs are kept out of the once-a-second work (an index of the jobs that are not held): a
// held job is never launched, one released (HoldPart, as `gpulane release` does) is launched at
// the next decision, one held again is not; a job added held and
// released, and jobs recovered held, alike.
TEST_F(JobTableTest, HeldJobsAreLeftOutUntilReleasedAndLaunchedOnceReleased) {
  const std::int64_t recovered_held = Stored(JobState::kHeld), pending = Stored(JobState::kPending);
  ASSERT_TRUE(Table().Recover());
  Submission held;  // submit --hold
  held.jobs = {MakeJob({}, {}, 0)};
  held.jobs[0].state = JobState::kHeld;
  const auto outcomes = Table().Submit(std::span(&held, 1));
  ASSERT_EQ(outcomes.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<SubmitStored>(outcomes[0].result));
  const std::int64_t added_held = std::get<SubmitStored>(outcomes[0].result).ids.at(0);
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, Ids{pending});
  Table().HoldPart(Ids{recovered_held, added_held}, "alice", false);  // gpulane release
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, (Ids{pending, recovered_held, added_held}));
  EXPECT_EQ(TableState(recovered_held), "launching");
}

TEST_F(JobTableTest, AJobHeldAgainBeforeTheDecisionIsNotLaunched) {
  const std::int64_t id = Stored(JobState::kPending);
  ASSERT_TRUE(Table().Recover());
  Table().HoldPart(Ids{id}, "alice", true);  // gpulane hold
  Table().LaunchEligible();
  EXPECT_TRUE(launcher_.started.empty());
  EXPECT_EQ(TableState(id), "held");
}

TEST_F(JobTableTest, ADependentStartsOnceItsDependencyCompletedAndIsCancelledWhenItFailed) {
  const std::int64_t before = Stored(JobState::kCompleted);  // ended before this daemon started: only in the store
  const std::int64_t a = Stored(JobState::kRunning), b = Stored(JobState::kRunning);
  HoldLock(a);
  HoldLock(b);
  Report(a, Running());
  Report(b, Running());
  const std::int64_t after_a = Stored(JobState::kPending, {a}), after_b = Stored(JobState::kPending, {b}),
                     any_b = Stored(JobState::kPending, {}, {b}), after_old = Stored(JobState::kPending, {before});
  ASSERT_TRUE(Table().Recover());
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, Ids{after_old});
  EXPECT_EQ(Table().active().at(after_a).reason, "waiting for job " + std::to_string(a));
  EXPECT_EQ(Table().active().at(any_b).reason, "waiting for job " + std::to_string(b) + " to end");
  Report(a, Done(0));
  Report(b, Done(1));
  Table().ImportStatus(a);
  Table().ImportStatus(b);
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, (Ids{after_old, after_a, any_b}));
  EXPECT_EQ(TableState(after_b), "");
  Job doomed = StoredJob(after_b);
  EXPECT_EQ(std::string(store::StateName(doomed.state)), "cancelled");
  EXPECT_EQ(doomed.reason, "its dependency job " + std::to_string(b) + " failed (--after needs it to complete)");
}

TEST_F(JobTableTest, ADependencyOnAnArrayMeansEveryTask) {
  const std::int64_t done = StoredArray({JobState::kCompleted, JobState::kCompleted});
  const std::int64_t failed = StoredArray({JobState::kCompleted, JobState::kFailed, JobState::kCompleted});
  const std::int64_t partly = StoredArray({JobState::kCompleted, JobState::kPending});
  const std::int64_t after_done = Stored(JobState::kPending, {done}), after_failed = Stored(JobState::kPending, {failed}),
                     after_partly = Stored(JobState::kPending, {partly});
  limits_.max_waiting = 10;
  ASSERT_TRUE(Table().Recover());
  Table().LaunchEligible();
  // The pending task of `partly` is launched too (it is a job in line like any other).
  EXPECT_EQ(launcher_.started, (Ids{partly + 1, after_done}));
  EXPECT_EQ(StoredJob(after_failed).reason, "its dependency job " + std::to_string(failed) + " failed (--after needs it to complete)");
  EXPECT_EQ(TableState(after_partly), "pending");
  EXPECT_EQ(Table().active().at(after_partly).reason, "waiting for job " + std::to_string(partly));
}

TEST_F(JobTableTest, ASupervisorThatCannotBeStartedIsALostLaunch) {
  const std::int64_t id = Stored(JobState::kPending);
  ASSERT_TRUE(Table().Recover());
  launcher_.result = MakeError(ErrorKind::kIo, "cannot start the supervisor of job 1: fork: out of memory");
  Table().LaunchEligible();
  EXPECT_TRUE(Logged("fork: out of memory"));
  EXPECT_EQ(TableState(id), "launching");
  launcher_.result = Status::Ok();
  clock_.Advance(kGraceS);
  Turn();
  EXPECT_EQ(launcher_.started, (Ids{id, id}));
}

// ---- status files -----------------------------------------------------------------------------

TEST_F(JobTableTest, ADamagedStatusFileIsLoggedAndStopsNeitherTheTableNorOtherJobs) {
  const std::int64_t damaged = Stored(JobState::kLaunching), ok = Stored(JobState::kLaunching);
  HoldLock(damaged);
  std::ofstream(Files(damaged).status_path()) << R"({"phase": 5, "pid": "not a pid"})";
  Report(ok, Done(0));
  ASSERT_NO_THROW(Table().Recover());
  EXPECT_TRUE(Logged("cannot read the status of job " + std::to_string(damaged))) << (log_.empty() ? "" : log_.back());
  EXPECT_EQ(TableState(damaged), "launching") << "left as it was";
  EXPECT_EQ(StoredState(ok), "completed") << "the others' status is still read";
  ASSERT_NO_THROW(Turn());
  std::ofstream(Files(damaged).status_path()) << "[1, 2]";
  ASSERT_NO_THROW(Table().ImportStatus(damaged));
  // Its supervisor's next report is read as usual.
  Report(damaged, Running());
  Table().ImportStatus(damaged);
  EXPECT_EQ(TableState(damaged), "running");
}

TEST_F(JobTableTest, RunningJobsLogFilesAreRecordedFromTheSecondReport) {
  const std::int64_t id = Stored(JobState::kLaunching);
  HoldLock(id);
  ASSERT_TRUE(Table().Recover());
  Report(id, Running());
  Table().ImportStatus(id);
  Table().FlushDirty();
  EXPECT_EQ(StoredJob(id).logs.stdout_path, "");
  SupervisorStatus with_logs = Running();
  with_logs.logs.stdout_path = "/tmp/gpulane-1.out";
  with_logs.logs.stderr_path = "/tmp/gpulane-1.out";
  Report(id, with_logs);
  Table().ImportStatus(id);
  Table().FlushDirty();
  EXPECT_EQ(StoredJob(id).logs.stdout_path, "/tmp/gpulane-1.out");
}

TEST_F(JobTableTest, FindAnswersForActiveAndFinishedJobs) {
  const std::int64_t done = Stored(JobState::kCompleted), queued = Stored(JobState::kLaunching);
  HoldLock(queued);
  Report(queued, Waiting("changed in the table"));  // a waiting supervisor's reason: not stored
  ASSERT_TRUE(Table().Recover());
  EXPECT_EQ(Table().active().count(done), 0u);
  ASSERT_TRUE(Table().Find(done));
  EXPECT_EQ(std::string(store::StateName(Table().Find(done)->state)), "completed");
  ASSERT_NE(StoredJob(queued).reason, "changed in the table");
  EXPECT_EQ(Table().Find(queued)->reason, "changed in the table") << "the table's copy, not the store's";
  EXPECT_FALSE(Table().Find(9999));
}


// ---- retries (--retry) ------------------------------------------------------------------------

namespace retries {

// A job of `retries` stored running with its supervisor (the test) holding its lock.
std::int64_t StoredRunning(store::JobStore& store, int retries) {
  Job job;
  job.spec.request.uid = 1000;
  job.gid = 1000;
  job.spec.request.user = "alice";
  job.spec.argv = {"false"};
  job.spec.cwd = "/tmp";
  job.spec.retries = retries;
  job.spec.request.submit_time_s = 1.0;
  std::vector<Job> jobs = {job};
  auto ids = store.Insert(jobs, false);
  EXPECT_TRUE(ids) << ids.error().message;
  jobs[0].state = JobState::kRunning;
  EXPECT_TRUE(store.Update({&jobs[0]}).ok());
  return jobs[0].id;
}

}  // namespace retries

TEST_F(JobTableTest, AFailedAttemptIsRecordedAndTheJobGoesBackInLineUntilTheRetriesAreSpent) {
  const std::int64_t id = retries::StoredRunning(*store_, 2);
  HoldLock(id);
  Report(id, Running());
  ASSERT_TRUE(Table().Recover());
  for (int attempt = 0; attempt < 2; ++attempt) {
    SupervisorStatus failed = Done(3);
    failed.start_time = 100.0 + attempt;
    failed.gpu_uuids = {attempt == 0 ? "GPU-0" : "GPU-1"};
    Report(id, failed);
    ReleaseLock(id);
    Table().CheckSupervisors();
    ASSERT_EQ(TableState(id), "pending") << "attempt " << attempt << " is retried";
    Job stored = StoredJob(id);
    EXPECT_EQ(std::string(store::StateName(stored.state)), "pending") << "the retry is durable at once";
    ASSERT_EQ(stored.attempts.size(), static_cast<std::size_t>(attempt + 1));
    EXPECT_EQ(stored.attempts.back().exit_code, 3);
    EXPECT_EQ(stored.attempts.back().start_time, 100.0 + attempt);
    EXPECT_EQ(stored.attempts.back().gpu_uuids, failed.gpu_uuids);
    EXPECT_FALSE(stored.exit_code) << "the new attempt has not ended";
    EXPECT_FALSE(stored.start_time);
    EXPECT_FALSE(fs::exists(Files(id).status_path())) << "the ended attempt's files are gone";
    EXPECT_EQ(Table().active().at(id).reason, fmt::format("retry {} of 2 after exit code 3", attempt + 1));
    // Started again, as the next attempt.
    launcher_.started.clear();
    Table().LaunchEligible();
    ASSERT_EQ(launcher_.started, Ids{id});
    auto spec = Files(id).ReadSpec();
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->attempts.size(), static_cast<std::size_t>(attempt + 1)) << "the supervisor learns its attempt";
    HoldLock(id);  // the next supervisor
    Report(id, Running());
    Table().CheckSupervisors();
    ASSERT_EQ(TableState(id), "running");
  }
  Report(id, Done(3));
  ReleaseLock(id);
  Table().CheckSupervisors();
  EXPECT_EQ(TableState(id), "") << "the last attempt ends the job";
  Job stored = StoredJob(id);
  EXPECT_EQ(std::string(store::StateName(stored.state)), "failed");
  EXPECT_EQ(stored.exit_code, 3);
  EXPECT_EQ(stored.attempts.size(), 2u) << "the earlier attempts; the last is the job's own fields";
}

// A preempted job (submit --preemptible, requeue) goes back in line exactly once per preemption:
// the attempt is recorded as preempted, not as a failure, and reading the same supervisor's files
// again (the next tick, a restart) adds nothing; --preemptible=cancel ends it cancelled.
TEST_F(JobTableTest, APreemptedJobIsRequeuedExactlyOnceAndNotCountedAsAFailure) {
  const std::int64_t id = retries::StoredRunning(*store_, 0), ended = retries::StoredRunning(*store_, 0);
  for (auto job : {id, ended}) {
    HoldLock(job);
    Report(job, Running());
  }
  ASSERT_TRUE(Table().Recover());
  SupervisorStatus preempted = Done(143);
  preempted.preempted = true;
  preempted.requeue = true;
  preempted.reason = "preempted: alice's job (1st in line) needs GPU0";
  Report(id, preempted);
  ReleaseLock(id);
  Table().CheckSupervisors();
  ASSERT_EQ(TableState(id), "pending");
  Table().CheckSupervisors();  // the next tick: its files are gone, nothing more happens
  Table().ImportStatus(id);
  Job stored = StoredJob(id);
  ASSERT_EQ(stored.attempts.size(), 1u);
  EXPECT_TRUE(stored.attempts[0].preempted);
  EXPECT_EQ(stored.attempts[0].state, JobState::kCancelled);
  EXPECT_EQ(store::FailedAttempts(stored), 0) << "a preemption uses none of --retry";
  EXPECT_EQ(Table().active().at(id).reason, "requeued: preempted: alice's job (1st in line) needs GPU0");

  ASSERT_EQ(TableState(ended), "running");
  preempted.requeue = false;  // --preemptible=cancel
  Report(ended, preempted);
  ReleaseLock(ended);
  Table().CheckSupervisors();
  EXPECT_EQ(TableState(ended), "");
  EXPECT_EQ(StoredJob(ended).state, JobState::kCancelled);
  EXPECT_EQ(StoredJob(ended).reason, preempted.reason);
}

TEST_F(JobTableTest, CancelledTimedOutAndLostAttemptsAreNeverRetried) {
  const std::int64_t cancelled = retries::StoredRunning(*store_, 5), timed_out = retries::StoredRunning(*store_, 5),
                     lost = retries::StoredRunning(*store_, 5), requested = retries::StoredRunning(*store_, 5);
  for (auto id : {cancelled, timed_out, requested}) {
    HoldLock(id);
    Report(id, Running());
  }
  Report(lost, Running());  // no lock: its supervisor died while the job ran; it may have completed
  ASSERT_TRUE(Table().Recover());
  SupervisorStatus interrupted = Done(143);
  interrupted.interrupted = true;
  Report(cancelled, interrupted);
  ReleaseLock(cancelled);
  SupervisorStatus late = Done(143);
  late.timed_out = true;
  Report(timed_out, late);
  ReleaseLock(timed_out);
  Table().CancelPart(Ids{requested}, "alice");
  Report(requested, Done(143));
  ReleaseLock(requested);
  Turn();
  EXPECT_TRUE(Table().active().empty());
  EXPECT_TRUE(launcher_.started.empty()) << "none runs again";
  EXPECT_EQ(StoredState(cancelled), "cancelled");
  EXPECT_EQ(StoredState(timed_out), "timeout");
  EXPECT_EQ(StoredState(lost), "failed");
  EXPECT_EQ(StoredState(requested), "cancelled");
  for (auto id : {cancelled, timed_out, lost, requested}) EXPECT_TRUE(StoredJob(id).attempts.empty()) << id;
}

TEST_F(JobTableTest, AFailureRecordedWhileNoDaemonRanIsRetriedAtRecovery) {
  const std::int64_t id = retries::StoredRunning(*store_, 1);
  HoldLock(id);
  Report(id, Running());
  Report(id, Done(1));
  ReleaseLock(id);
  // The supervisor recorded the failure while no daemon ran: the restarted one retries the job as
  // a running daemon would have.
  ASSERT_TRUE(Table().Recover());
  EXPECT_EQ(TableState(id), "pending");
  EXPECT_EQ(StoredJob(id).attempts.size(), 1u);
  Table().LaunchEligible();
  Report(id, Done(0));
  Table().CheckSupervisors();
  EXPECT_EQ(StoredState(id), "completed");
  EXPECT_EQ(StoredJob(id).attempts.size(), 1u);
}

TEST_F(JobTableTest, AStaleDoneStatusOfARetriedAttemptIsRemovedBeforeTheNextSupervisorStarts) {
  // Stored as retried (pending, one earlier attempt), but the daemon died before removing the
  // earlier supervisor's "done" status: the new supervisor must not take it for its own.
  const std::int64_t id = retries::StoredRunning(*store_, 2);
  Job job = StoredJob(id);
  job.state = JobState::kPending;
  job.attempts = {store::JobAttempt{}};
  ASSERT_TRUE(store_->Update({&job}).ok());
  Report(id, Done(1));
  ASSERT_TRUE(Table().Recover());
  Table().LaunchEligible();
  ASSERT_EQ(launcher_.started, Ids{id});
  EXPECT_FALSE(fs::exists(Files(id).status_path()));
  Table().CheckSupervisors();
  EXPECT_EQ(TableState(id), "launching") << "not ended by the earlier attempt's status";
}

// ---- fair share ---------------------------------------------------------------------------------

TEST_F(JobTableTest, AHeavyUsersPendingJobsWaitBehindALightUsersLaterOneAcrossARestart) {
  limits_.max_waiting = 1;
  // Alice's job ran 4 GPUs for two hours and ended an hour ago (as a daemon before the restart
  // stored it); she has two jobs waiting, bob one submitted after them.
  ASSERT_NO_FATAL_FAILURE(StoreEndedFourGpuJob(3 * 3600, 3600));
  const std::int64_t a1 = Stored(JobState::kPending), a2 = Stored(JobState::kPending);
  Job of_bob = MakeJob({}, {}, 0);
  of_bob.spec.request.user = "bob";
  of_bob.spec.request.uid = 1001;
  of_bob.spec.request.submit_time_s = 2.0;
  std::vector<Job> b = {of_bob};
  ASSERT_TRUE(store_->Insert(b, false));
  const std::int64_t b1 = b[0].id;
  ASSERT_TRUE(Table().Recover());
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, (Ids{b1})) << "bob's job first: alice's past use survived the restart in the store";
  const std::string why = Table().active().at(a1).reason;
  EXPECT_NE(why.find("alice used 7.6 GPU-h"), std::string::npos) << why;  // 8 GPU-h one to three hours ago, decayed
  EXPECT_NE(why.find(fmt::format("behind bob's job {}", b1)), std::string::npos) << why;
  EXPECT_NE(Table().active().at(a2).reason.find(fmt::format("behind alice's job {}", a1)), std::string::npos);
  auto shares = Table().ShareTable();
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].user, "alice");
  EXPECT_NEAR(shares[0].usage_gpu_s, 4 * 3600 * 24 / std::log(2.0) * (std::exp2(-1.0 / 24) - std::exp2(-3.0 / 24)), 1);
  EXPECT_NEAR(shares[0].factor, 0.25, 1e-9) << "all the use, half the shares: 2^-2";
  EXPECT_EQ(shares[1].factor, 1);
}

TEST_F(JobTableTest, ARunningJobsUseCountsSoFarAndItsEndIsKept) {
  limits_.max_waiting = 1;
  const std::int64_t running = Stored(JobState::kLaunching);
  HoldLock(running);
  SupervisorStatus status = Running();
  status.start_time = clock_.WallS();
  Report(running, status);
  ASSERT_TRUE(Table().Recover());
  clock_.Advance(3600);
  auto shares = Table().ShareTable();
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_NEAR(shares[0].usage_gpu_s, 24 * 3600 / std::log(2.0) * (1 - std::exp2(-1.0 / 24)), 1) << "an hour of one GPU so far";
  SupervisorStatus done = status;
  done.phase = "done";
  done.exit_code = 0;
  done.end_time = clock_.WallS();
  Report(running, done);
  Table().ImportStatus(running);
  clock_.Advance(86400);
  shares = Table().ShareTable();
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_NEAR(shares[0].usage_gpu_s, 0.5 * 24 * 3600 / std::log(2.0) * (1 - std::exp2(-1.0 / 24)), 1) << "halved a day later";
}

// `gpulane run` leases the sampler metered (JobTable::AddLeaseUsage) count for fair share: live
// ones up to now, ended ones decayed; the factors published to the lease line say so.
TEST_F(JobTableTest, GpulaneRunLeasesCountForFairShareAndArePublishedToTheLine) {
  ASSERT_TRUE(Table().Recover());
  const double t0 = clock_.WallS();
  Table().AddLeaseUsage({}, {{"carol", t0, std::nullopt, 2}});  // `run -g 2`, running
  clock_.Advance(3600);
  auto shares = Table().ShareTable();
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares[0].user, "carol");
  EXPECT_NEAR(shares[0].usage_gpu_s, 2 * 24 * 3600 / std::log(2.0) * (1 - std::exp2(-1.0 / 24)), 1) << "two GPUs for an hour";
  // It ended; dave's `run --mem` share of half a GPU has run for the same hour.
  Table().AddLeaseUsage({{"carol", t0, t0 + 3600, 2}}, {{"dave", t0, std::nullopt, 0.5}});
  const sched::LineShares line = Table().LineShares();
  EXPECT_EQ(line.written_s, clock_.WallS());
  ASSERT_EQ(line.factor_of_user.size(), 2u);
  EXPECT_NEAR(line.factor_of_user.at("carol"), std::exp2(-0.8 / 0.5), 1e-6) << "4/5 of the use, half the shares";
  EXPECT_NEAR(line.factor_of_user.at("dave"), std::exp2(-0.2 / 0.5), 1e-6);
}

// ---- limits.max_gpu_hours_per_day ---------------------------------------------------------------

TEST_F(JobTableTest, AUserOverHerGpuHoursOfTheLast24HoursWaitsUntilEnoughLeftTheWindowOthersDoNot) {
  limits_.max_gpu_hours_of = [](std::uint32_t uid, const std::string&) {
    return uid == 0 ? std::nullopt : std::optional<double>(20);
  };
  // Alice's job ran 4 GPUs from 13 h to 7 h ago (24 GPU-h, as a daemon before the restart stored
  // it); she and bob each have a job waiting.
  ASSERT_NO_FATAL_FAILURE(StoreEndedFourGpuJob(13 * 3600, 7 * 3600));
  const std::int64_t hers = Stored(JobState::kPending);
  Job of_bob = MakeJob({}, {}, 0);
  of_bob.spec.request.user = "bob";
  of_bob.spec.request.uid = 1001;
  std::vector<Job> b = {of_bob};
  ASSERT_TRUE(store_->Insert(b, false));
  ASSERT_TRUE(Table().Recover());
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, (Ids{b[0].id})) << "bob's job starts, alice's does not";
  EXPECT_EQ(Table().active().at(hers).reason,
            "alice used 24.0 of the 20 GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h; alice's next job can "
            "start in about 12h 00m");
  // 11 h later her run starts leaving the window (4 GPU-s a second): 20 GPU-h are left an hour later.
  clock_.Advance(12 * 3600 - 60);
  Table().LaunchEligible();
  EXPECT_EQ(TableState(hers), "pending");
  EXPECT_NE(Table().active().at(hers).reason.find("alice used 20.1 of the 20 GPU-hours"), std::string::npos)
      << Table().active().at(hers).reason;
  clock_.Advance(61);
  Table().LaunchEligible();
  EXPECT_EQ(TableState(hers), "launching");
}

TEST_F(JobTableTest, ARunningJobsGpuHoursCountSoFarAndWhenItEndsItsRecordIsKept) {
  limits_.max_gpu_hours_of = [](std::uint32_t, const std::string&) { return std::optional<double>(1); };
  const std::int64_t running = Stored(JobState::kLaunching);
  HoldLock(running);
  SupervisorStatus status = Running();
  status.start_time = clock_.WallS();
  Report(running, status);
  const std::int64_t next = Stored(JobState::kPending);
  ASSERT_TRUE(Table().Recover());
  clock_.Advance(3600);
  Table().LaunchEligible();
  EXPECT_EQ(Table().active().at(next).reason,
            "alice used 1.00 of the 1 GPU-hours limits.max_gpu_hours_per_day allows in the last 24 h")
      << "an hour of one GPU so far; while it runs, when is not known";
  SupervisorStatus done = status;
  done.phase = "done";
  done.exit_code = 0;
  done.end_time = clock_.WallS();
  Report(running, done);
  Table().ImportStatus(running);
  ReleaseLock(running);
  Table().LaunchEligible();
  EXPECT_EQ(TableState(next), "pending");
  EXPECT_NE(Table().active().at(next).reason.find("alice's next job can start in about 23h 00m"), std::string::npos)
      << Table().active().at(next).reason;
  clock_.Advance(23 * 3600 + 1);
  Table().LaunchEligible();
  EXPECT_EQ(TableState(next), "launching");
}


// ---- the one owner of job state: cancel, hold and idle cancel as the table's events ------------

// Invariant 4: a cancel of a running job signals its supervisor once, and the job ends only when
// its supervisor reports its end (not at the cancel, not at the next ticks).
TEST_F(JobTableTest, ACancelOfARunningJobSignalsItsSupervisorOnceAndItEndsOnlyWhenTheSupervisorReports) {
  const std::int64_t id = Stored(JobState::kLaunching);
  HoldLock(id);
  const SupervisorStatus running = Running();
  Report(id, running);
  ASSERT_TRUE(Table().Recover());
  const PartResult part = Table().CancelPart(Ids{id}, "bob");
  ASSERT_FALSE(part.refused);
  ASSERT_EQ(part.changed.size(), 1u);
  EXPECT_TRUE(part.changed[0].in_progress);
  ASSERT_EQ(launcher_.signals.size(), 1u);
  EXPECT_EQ(launcher_.signals[0], (test::RecordingLauncher::Sent{id, running.pid, SIGTERM}));
  EXPECT_EQ(Table().active().at(id).reason, "cancelling (by bob)");
  for (int i = 0; i < 3; ++i) {
    Turn();
    EXPECT_EQ(TableState(id), "running") << "it ends when its supervisor says so";
  }
  EXPECT_EQ(StoredState(id), "running");
  SupervisorStatus stopped = Done(143);
  stopped.interrupted = true;
  Report(id, stopped);
  ReleaseLock(id);
  Turn();
  EXPECT_EQ(TableState(id), "");
  EXPECT_EQ(StoredState(id), "cancelled");
  EXPECT_EQ(launcher_.SignalsTo(id), std::vector<int>{SIGTERM}) << "signalled once";
}

// The race a user met: a supervisor got its GPU and recorded the job "running" a moment before the
// table read it (the table still has it launching). Its cancel must not be said to come before the
// job started: only a supervisor that still reports "waiting" after the SIGTERM is (it then never
// starts the command: exec/leased_job.h). And one whose pid is not known yet was not signalled.
TEST_F(JobTableTest, ACancelOfALaunchIsSaidBeforeItsStartOnlyWhenItsSupervisorStillReportsWaiting) {
  const std::int64_t waiting = Stored(JobState::kLaunching), granted = Stored(JobState::kLaunching),
                     silent = Stored(JobState::kLaunching);
  HoldLock(waiting);
  HoldLock(granted);
  Report(waiting, Waiting("in line for GPU0 (#1)"));
  Report(granted, Waiting("in line for GPU0 (#1)"));
  ASSERT_TRUE(Table().Recover());
  Turn();
  ASSERT_EQ(TableState(granted), "launching");
  SupervisorStatus running = Waiting("");
  running.phase = "running";  // its next report, not read by the table yet
  running.start_time = clock_.WallS();
  Report(granted, running);
  const PartResult part = Table().CancelPart(Ids{waiting, granted, silent}, "bob");
  ASSERT_EQ(part.changed.size(), 3u);
  EXPECT_EQ(part.changed[0].id, waiting);
  EXPECT_TRUE(part.changed[0].before_start) << "its supervisor still waits after the signal";
  EXPECT_EQ(part.changed[1].id, granted);
  EXPECT_FALSE(part.changed[1].before_start) << "it may have started: its supervisor reported it running";
  EXPECT_TRUE(part.changed[1].in_progress);
  EXPECT_EQ(part.changed[2].id, silent);
  EXPECT_FALSE(part.changed[2].before_start) << "not signalled yet: nothing confirms it";
  EXPECT_EQ(TableState(granted), "launching") << "the table had not read its report: the race";
}

// `gpulane show` of a job cancelled while its supervisor waited for GPUs names who cancelled it,
// as for a pending or running one (docs/queue.md: "cancelled by alice"), not only "cancelled
// while waiting for GPUs".
TEST_F(JobTableTest, AJobCancelledWhileWaitingForGpusSaysWhoCancelledIt) {
  const std::int64_t id = Stored(JobState::kLaunching);
  HoldLock(id);
  Report(id, Waiting("in line for GPU0 (#1)"));
  ASSERT_TRUE(Table().Recover());
  Table().CancelPart(Ids{id}, "root");
  SupervisorStatus stopped = Done(std::nullopt);  // as supervisor.cc records a stop while waiting
  stopped.interrupted = true;
  stopped.reason = "cancelled while waiting for GPUs";
  stopped.start_time.reset();
  stopped.gpu_uuids.clear();
  Report(id, stopped);
  ReleaseLock(id);
  Turn();
  EXPECT_EQ(StoredState(id), "cancelled");
  EXPECT_EQ(StoredJob(id).reason, "cancelled by root while waiting for GPUs");
}

// A cancel of a job whose supervisor has not reported its pid yet signals nobody then, and its
// supervisor once, when it reports itself.
TEST_F(JobTableTest, ACancelOfALaunchIsPassedToItsSupervisorOnceWhenItReportsItself) {
  const std::int64_t id = Stored(JobState::kLaunching);
  ASSERT_TRUE(Table().Recover());
  Table().CancelPart(Ids{id}, "bob");
  EXPECT_TRUE(launcher_.signals.empty());
  HoldLock(id);
  Report(id, Waiting("waiting for GPUs"));
  Turn();
  Turn();
  EXPECT_EQ(launcher_.SignalsTo(id), std::vector<int>{SIGTERM});
  EXPECT_EQ(TableState(id), "launching");
}

// Invariant 3: pending and held jobs are cancelled by one write; the part's log line comes only
// once their rows say "cancelled", and only then have they left the table.
TEST_F(JobTableTest, ACancelPartIsStoredBeforeItIsLoggedAndItsJobsLeaveTheTable) {
  const std::int64_t pending = Stored(JobState::kPending), held = Stored(JobState::kHeld);
  ASSERT_TRUE(Table().Recover());
  int checked = 0;
  on_log_ = [&](const std::string& line) {
    if (line.find("cancelled by bob") == std::string::npos) return;
    ++checked;
    EXPECT_EQ(StoredState(pending), "cancelled") << line;
    EXPECT_EQ(StoredState(held), "cancelled") << line;
  };
  const PartResult part = Table().CancelPart(Ids{pending, held}, "bob");
  EXPECT_EQ(checked, 1) << "one line for the part";
  ASSERT_EQ(part.changed.size(), 2u);
  EXPECT_FALSE(part.changed[0].in_progress);
  EXPECT_EQ(TableState(pending), "");
  EXPECT_EQ(TableState(held), "");
  EXPECT_EQ(StoredJob(pending).reason, "cancelled by bob");
  EXPECT_TRUE(launcher_.signals.empty()) << "no supervisor: nobody to signal";
  Turn();
  EXPECT_TRUE(launcher_.started.empty());
}

// A pending job chosen for a cancel or hold in parts is not launched before its part; where the
// change stops before its part (EndParts), it may start again.
TEST_F(JobTableTest, APendingJobChosenForAChangeInPartsWaitsForItsPartOrItsEnd) {
  const std::int64_t cancelled = Stored(JobState::kPending), held = Stored(JobState::kPending);
  ASSERT_TRUE(Table().Recover());
  Table().BeginParts(PartsOp::kCancel, Ids{cancelled});
  Table().BeginParts(PartsOp::kHold, Ids{held});
  Table().LaunchEligible();
  EXPECT_TRUE(launcher_.started.empty());
  Table().EndParts(PartsOp::kCancel, Ids{cancelled});
  Table().EndParts(PartsOp::kHold, Ids{held});
  Table().LaunchEligible();
  EXPECT_EQ(launcher_.started, (Ids{cancelled, held}));
}

// A hold stores its pending jobs held before it logs them, and asks a supervisor waiting for GPUs
// (once) to leave the line: that job is held only once its supervisor reports it left.
TEST_F(JobTableTest, AHoldPartStoresPendingJobsHeldAndAsksAWaitingSupervisorOnceToLeaveTheLine) {
  const std::int64_t pending = Stored(JobState::kPending), waiting = Stored(JobState::kLaunching);
  HoldLock(waiting);
  Report(waiting, Waiting("waiting for GPUs"));
  ASSERT_TRUE(Table().Recover());
  on_log_ = [&](const std::string& line) {
    if (line.find("held by bob") != std::string::npos) {
      EXPECT_EQ(StoredState(pending), "held") << line;
    }
  };
  const PartResult part = Table().HoldPart(Ids{pending, waiting}, "bob", true);
  ASSERT_EQ(part.changed.size(), 2u);
  EXPECT_EQ(part.changed[0].id, waiting);
  EXPECT_TRUE(part.changed[0].in_progress);
  EXPECT_TRUE(Logged("held by bob: 1 job of alice"));
  EXPECT_EQ(TableState(pending), "held");
  EXPECT_EQ(launcher_.SignalsTo(waiting), std::vector<int>{HoldSignal()});
  Turn();
  EXPECT_EQ(TableState(waiting), "launching");
  EXPECT_EQ(launcher_.SignalsTo(waiting), std::vector<int>{HoldSignal()}) << "once";
  SupervisorStatus left = Done(std::nullopt);
  left.held = true;
  left.interrupted = true;
  Report(waiting, left);
  ReleaseLock(waiting);
  Turn();
  EXPECT_EQ(StoredState(waiting), "held");
  EXPECT_TRUE(launcher_.started.empty());
}

// Invariant 3 for the telemetry's idle cancel: its reason is stored before the supervisor gets
// SIGTERM (a restarted daemon still knows why the job ends), and the job ends cancelled with it.
TEST_F(JobTableTest, AnIdleCancelIsStoredBeforeItsSupervisorIsSignalledAndTheJobEndsWithItsReason) {
  const std::int64_t id = Stored(JobState::kLaunching), pending = Stored(JobState::kPending);
  HoldLock(id);
  Report(id, Running());
  ASSERT_TRUE(Table().Recover());
  const std::string why = "idle (0% GPU) for 2h0m: cancelled";
  int signalled = 0;
  launcher_.on_signal = [&](std::int64_t to, int) {
    ++signalled;
    EXPECT_EQ(StoredJob(to).reason, why) << "stored before the signal";
  };
  EXPECT_FALSE(Table().CancelIdle(pending, why)) << "only launched jobs are metered";
  EXPECT_FALSE(Table().CancelIdle(9999, why));
  EXPECT_TRUE(Table().CancelIdle(id, why));
  EXPECT_EQ(signalled, 1);
  EXPECT_EQ(launcher_.SignalsTo(id), std::vector<int>{SIGTERM});
  EXPECT_EQ(TableState(id), "running");
  SupervisorStatus stopped = Done(143);
  stopped.interrupted = true;
  Report(id, stopped);
  ReleaseLock(id);
  Turn();
  EXPECT_EQ(StoredState(id), "cancelled");
  EXPECT_EQ(StoredJob(id).reason, why);
  EXPECT_EQ(TableState(pending), "launching") << "the pending job was left alone";
}

}  // namespace
}  // namespace gpulane::daemon
