// The exec mark of exec::RunJob (JobSpec::exec_mark_fd): the forked child writes '1' over the
// mark's first byte just before its execve and '0' back when execve fails; it does not exec when it
// cannot write the mark; the job never inherits the mark's descriptor. The daemon's decision for a
// lost supervisor rests on this (daemon/job_files.h, DecideLostSupervisor).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "exec/job_runner.h"
#include "os/env.h"

namespace gpulane::exec {
namespace {

namespace fs = std::filesystem;

class ExecMarkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpulane-exec-mark-test-XXXXXX";
    dir_ = mkdtemp(dir);
    mark_ = (dir_ / "1.exec").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The mark as the supervisor creates it ('0'), open with `flags`.
  int OpenMark(int flags) {
    int fd = open(mark_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT_EQ(pwrite(fd, "0", 1, 0), 1);
    close(fd);
    fd = open(mark_.c_str(), flags | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    return fd;
  }
  char MarkByte() {
    char c = '?';
    int fd = open(mark_.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_EQ(pread(fd, &c, 1, 0), 1);
    close(fd);
    return c;
  }
  JobSpec Spec(std::vector<std::string> argv, int mark_fd) {
    JobSpec spec;
    spec.argv = std::move(argv);
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.kill_grace_s = 1;
    spec.exec_mark_fd = mark_fd;
    return spec;
  }

  fs::path dir_;
  std::string mark_;
  const os::SystemEnv real_os_;  // the real clock and fork
};

TEST_F(ExecMarkTest, TheChildMarksItsExecAndTheJobDoesNotInheritTheMark) {
  const int fd = OpenMark(O_RDWR);
  // The job's shell finds no descriptor of that number: the mark closed at the exec.
  auto ran = RunJob(Spec({"/bin/sh", "-c", "test ! -e /proc/self/fd/" + std::to_string(fd)}, fd), real_os_.env(), {});
  close(fd);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_FALSE(ran->exec_failed) << ran->exec_error;
  EXPECT_EQ(ran->exit_code, 0) << "the mark's descriptor reached the job";
  EXPECT_EQ(MarkByte(), '1');
}

TEST_F(ExecMarkTest, AFailedExecPutsTheMarkBack) {
  const int fd = OpenMark(O_RDWR);
  auto ran = RunJob(Spec({(dir_ / "no-such-command").string()}, fd), real_os_.env(), {});
  close(fd);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_TRUE(ran->exec_failed);
  EXPECT_EQ(ran->exit_code, 127);
  EXPECT_EQ(MarkByte(), '0') << "the command never started";
}

TEST_F(ExecMarkTest, AMarkThatCannotBeWrittenKeepsTheCommandFromStarting) {
  const int fd = OpenMark(O_RDONLY);
  const fs::path ran_file = dir_ / "ran";
  auto ran = RunJob(Spec({"/bin/sh", "-c", "touch " + ran_file.string()}, fd), real_os_.env(), {});
  close(fd);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_TRUE(ran->exec_failed);
  EXPECT_NE(ran->exec_error.find("cannot record the start for the job"), std::string::npos) << ran->exec_error;
  EXPECT_FALSE(fs::exists(ran_file)) << "the command ran without its mark";
  EXPECT_EQ(MarkByte(), '0');
}

}  // namespace
}  // namespace gpulane::exec
