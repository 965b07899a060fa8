// A job's end on a state folder that filled up while the job ran (the supervisor's side of
// scripts/storage-faults.py state-disk-full-finish): the end is written into the room set aside at
// the job's start, and nothing the supervisor says about it on a full disk ends the supervisor.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/job_files.h"
#include "os/file_system.h"
#include "support/small_tmpfs.h"
#include "util/say.h"

namespace gpulane::daemon {
namespace {

namespace fs = std::filesystem;

ino_t InodeOf(const fs::path& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The daemon retries its store on every tick on the same full folder: had the reserve been freed
// before the end was written, the daemon could have taken the room (CI, 2026-12-06: the job was
// then recorded as failed, "its supervisor ended without recording the job's end"). The end goes
// into the reserve's own blocks: the status file is the reserve's inode.
TEST(JobEndReserve, OnAFullFolderTheEndIsWrittenIntoTheReserveItself) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  const fs::path dir = fs::path(::testing::TempDir()) / ("job-end-reserve-" + std::to_string(getpid()));
  test::SmallTmpfs folder(dir, "1m");
  if (!folder.mounted()) GTEST_SKIP() << "cannot mount a tmpfs: " << folder.why();
  os::SystemFileSystem disk;
  JobFiles files(disk, dir.string(), 7);
  ASSERT_TRUE(files.Reserve(64 * 1024).ok());
  const ino_t reserve = InodeOf(files.reserve_path());
  folder.Fill();
  SupervisorStatus done;
  done.phase = "done";
  done.exit_code = 0;
  done.reason = std::string(2000, 'r');  // more than the folder's last partial page
  ASSERT_FALSE(files.WriteStatus(done).ok()) << "the folder is full";

  Status written = files.WriteStatusReserved(done);
  ASSERT_TRUE(written.ok()) << written.error().message;
  auto read = files.ReadStatus();
  ASSERT_TRUE(read);
  EXPECT_EQ(read->phase, "done");
  EXPECT_EQ(read->exit_code, 0);
  EXPECT_EQ(InodeOf(files.status_path()), reserve) << "written in the reserve's blocks, not in freed room";
  EXPECT_FALSE(fs::exists(files.reserve_path()));
  struct stat st {};
  ASSERT_EQ(stat(files.status_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "readable as every status file is";
}

TEST(JobEndReserve, WithRoomTheReserveIsGivenBack) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("job-end-room-" + std::to_string(getpid()));
  fs::create_directories(dir);
  os::SystemFileSystem disk;
  JobFiles files(disk, dir.string(), 8);
  ASSERT_TRUE(files.Reserve(64 * 1024).ok());
  SupervisorStatus done;
  done.phase = "done";
  ASSERT_TRUE(files.WriteStatusReserved(done).ok());
  EXPECT_EQ(files.ReadStatus()->phase, "done");
  EXPECT_FALSE(fs::exists(files.reserve_path()));
  fs::remove_all(dir);
}

// fmt::print(stderr, ...) throws when the write fails; a supervisor's stderr is a file in the state
// folder. Say on a full stderr (/dev/full) must neither throw nor end the process.
TEST(JobEndReserve, SayingSomethingOnAFullStderrDoesNotEndTheSupervisor) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (full < 0 || dup2(full, STDERR_FILENO) < 0) _exit(3);
    Say("gpulane _supervise: cannot record the job's end: {}; trying again until it can\n", "No space left on device");
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace gpulane::daemon
