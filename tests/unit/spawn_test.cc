// os::SystemSpawner (os/spawn.h): the one place below cli/ that forks. A detached start leaves a
// process that is not the caller's child and not in the caller's session (a supervisor outlives the
// daemon, a notification's delivery its job), and `first` can stop it before anything starts (a
// notification that cannot drop root's rights is never sent as root).
#include "os/spawn.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace gpulane::os {
namespace {

struct Seen {
  pid_t parent = 0, session = 0;
};

TEST(SystemSpawner, ADetachedProcessIsNeitherTheCallersChildNorInItsSession) {
  // A subreaper (exec::RunJob makes its caller one: so did an earlier test in this process) gets
  // every orphan below it back as its child, detached or not: that is the kernel's rule, not the
  // spawner's, so it is set aside for this test.
  int subreaper = 0;
  ASSERT_EQ(prctl(PR_GET_CHILD_SUBREAPER, &subreaper), 0);
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  struct Restore {
    int was;
    ~Restore() { prctl(PR_SET_CHILD_SUBREAPER, was); }
  } restore{subreaper};
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  SystemSpawner spawner;
  ASSERT_TRUE(spawner.StartDetached([] {}, [&] {
    const Seen seen{getppid(), getsid(0)};
    (void)!write(fds[1], &seen, sizeof seen);
    _exit(0);
  }).ok());
  close(fds[1]);
  Seen seen;
  ASSERT_EQ(read(fds[0], &seen, sizeof seen), static_cast<ssize_t>(sizeof seen));
  close(fds[0]);
  EXPECT_NE(seen.parent, getpid());
  EXPECT_NE(seen.session, getsid(0));
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a child of the caller is left to reap";
}

TEST(SystemSpawner, AFirstStepThatExitsStartsNothing) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  SystemSpawner spawner;
  ASSERT_TRUE(spawner.StartDetached([] { _exit(1); }, [&] {
    (void)!write(fds[1], "x", 1);
    _exit(0);
  }).ok());
  close(fds[1]);
  char c;
  EXPECT_EQ(read(fds[0], &c, 1), 0) << "the process started after its first step gave up";
  close(fds[0]);
}

TEST(SystemSpawner, StartRunsTheChildAndHandsItsPidToTheCaller) {
  SystemSpawner spawner;
  auto pid = spawner.Start([] { _exit(7); });
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7);
}

}  // namespace
}  // namespace gpulane::os
