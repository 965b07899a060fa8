// The job files through os::FileSystem (issue 25, item 3): JobFiles and JobIdsWithFiles run on
// files kept in memory, so the hand-over between the daemon and a supervisor (spec, status,
// liveness, removal, the folder's listing) is tested without a disk. The folder named here does
// not exist on disk: a call that went to the disk instead of the FileSystem would fail.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "daemon/job_files.h"
#include "store/job.h"
#include "support/memory_files.h"

namespace gpulane::daemon {
namespace {

const std::string kMemoryJobsDir = "/gpulane-jobs-in-memory-only/jobs";

store::Job MemoryFilesJob(std::int64_t id) {
  store::Job job;
  job.id = id;
  job.spec.request.uid = job.gid = 1000;
  job.spec.request.user = "alice";
  job.spec.argv = {"python3", "train.py"};
  job.spec.cwd = "/home/alice";
  job.spec.name = "train";
  return job;
}

TEST(JobFilesInMemory, SpecWrittenAndReadBackWithoutADisk) {
  ASSERT_FALSE(std::filesystem::exists(kMemoryJobsDir));
  test::MemoryFiles memory;
  JobFiles files(memory, kMemoryJobsDir, 7);
  EXPECT_EQ(files.ReadSpec().error().kind, ErrorKind::kNotFound);
  const store::Job job = MemoryFilesJob(7);
  ASSERT_TRUE(files.WriteSpec(job).ok());
  EXPECT_EQ(memory.files.count(files.spec_path()), 1u) << "the spec is in the FileSystem it was given";
  auto back = files.ReadSpec();
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(*back == job) << store::JobToStoredJson(*back).dump();
  EXPECT_FALSE(std::filesystem::exists(files.spec_path())) << "nothing written to disk";
}

TEST(JobFilesInMemory, StatusWrittenReadAndRemoved) {
  test::MemoryFiles memory;
  JobFiles files(memory, kMemoryJobsDir, 7);
  EXPECT_FALSE(files.ReadStatus()) << "no status yet";
  SupervisorStatus running;
  running.phase = "running";
  running.pid = 4242;
  running.gpu_uuids = {"GPU-1"};
  running.marks_exec = true;
  ASSERT_TRUE(files.WriteStatus(running).ok());
  auto read = files.ReadStatus();
  ASSERT_TRUE(read);
  EXPECT_EQ(read->phase, "running");
  EXPECT_EQ(read->pid, 4242);
  EXPECT_EQ(read->gpu_uuids, std::vector<std::string>{"GPU-1"});
  SupervisorStatus done = *read;
  done.phase = "done";
  done.exit_code = 3;
  ASSERT_TRUE(files.WriteStatus(done).ok());
  EXPECT_EQ(files.ReadStatus()->exit_code, 3);
  files.RemoveStatus();
  EXPECT_FALSE(files.ReadStatus()) << "removed";
}

TEST(JobFilesInMemory, LivenessAndExecMarkAsTheFilesSay) {
  test::MemoryFiles memory;
  JobFiles files(memory, kMemoryJobsDir, 7);
  EXPECT_FALSE(files.SupervisorAlive()) << "no lock file: no supervisor";
  memory.files[files.lock_path()] = {};
  EXPECT_FALSE(files.SupervisorAlive()) << "a lock file nobody holds";
  memory.locked.insert(files.lock_path());
  EXPECT_TRUE(files.SupervisorAlive());
  EXPECT_FALSE(files.ExecMarked());
  memory.files[files.exec_path()].data = "0";
  EXPECT_FALSE(files.ExecMarked()) << "created by the supervisor, not yet written by the child";
  memory.files[files.exec_path()].data = "1";
  EXPECT_TRUE(files.ExecMarked());
}

TEST(JobFilesInMemory, RemoveTakesEveryFileOfTheJobAndTheListingFollows) {
  test::MemoryFiles memory;
  EXPECT_FALSE(JobIdsWithFiles(memory, kMemoryJobsDir)) << "no folder: unknown, not empty";
  memory.files[kMemoryJobsDir].kind = os::FileInfo::Kind::kDirectory;
  EXPECT_EQ(JobIdsWithFiles(memory, kMemoryJobsDir), std::set<std::int64_t>{});
  JobFiles seven(memory, kMemoryJobsDir, 7), twelve(memory, kMemoryJobsDir, 12);
  ASSERT_TRUE(seven.WriteSpec(MemoryFilesJob(7)).ok());
  ASSERT_TRUE(seven.WriteStatus(SupervisorStatus{}).ok());
  memory.files[seven.lock_path()] = {};
  memory.files[seven.exec_path()].data = "0";
  memory.files[seven.reserve_path()] = {};
  ASSERT_TRUE(twelve.WriteStatus(SupervisorStatus{}).ok());
  memory.files[kMemoryJobsDir + "/notes.txt"] = {};
  EXPECT_EQ(JobIdsWithFiles(memory, kMemoryJobsDir), (std::set<std::int64_t>{7, 12}));
  seven.Remove();
  for (const std::string& path :
       {seven.spec_path(), seven.status_path(), seven.lock_path(), seven.exec_path(), seven.reserve_path()})
    EXPECT_EQ(memory.files.count(path), 0u) << path;
  EXPECT_EQ(JobIdsWithFiles(memory, kMemoryJobsDir), std::set<std::int64_t>{12});
  EXPECT_TRUE(twelve.ReadStatus()) << "another job's files are left";
}

}  // namespace
}  // namespace gpulane::daemon
