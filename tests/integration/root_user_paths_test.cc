// Root never opens a user's path with root's rights (issue 23, item 1; docs/security.md): a job of
// a system-mode (root) daemon swaps its log, just before it ends, for a symlink to a root-only
// file, a folder on the way for a symlink to a root-only folder or to /dev, or for a FIFO; its
// --notify command (run as its user) must get none of root's files in GPULANE_LOG_TAIL, and its
// root supervisor must neither hang nor read without bound: it ends, and the notification is sent.
// Needs root and a second user (skipped otherwise).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

class RootReadsNoUserPath : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = TwoTestUsers(&a_, &b_)) GTEST_SKIP() << *why;
    d_ = std::make_unique<TestDaemon>(DaemonOptions{.system_mode = true});
    home_ = d_->UserDir(a_);
    // The notify command (run as a): GPULANE_LOG_TAIL into tail-<job id>, renamed into place whole.
    const fs::path script = home_ / "notify.sh";
    std::ofstream(script) << fmt::format("#!/bin/sh\nprintf '%s' \"$GPULANE_LOG_TAIL\" > {0}/tail-$GPULANE_JOB_ID.tmp && "
                                         "mv {0}/tail-$GPULANE_JOB_ID.tmp {0}/tail-$GPULANE_JOB_ID\n",
                                         home_.string());
    fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    config_ = home_ / "user.toml";
    std::ofstream(config_) << fmt::format("[notify]\ncommand = \"{}\"\n", script.string());
    // Root's secret: a 0600 file of root's in a folder of root's (0755: the folder alone hides nothing).
    secret_dir_ = d_->dir() / "root-only";
    fs::create_directories(secret_dir_);
    fs::permissions(secret_dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                     fs::perms::others_read | fs::perms::others_exec);
    std::ofstream(secret_dir_ / "secret.log") << "root:TOPSECRET-hash-of-root:19000:0:99999:7:::\n";
    fs::permissions(secret_dir_ / "secret.log", fs::perms::owner_read | fs::perms::owner_write);
  }

  // A folder of a's under her home.
  fs::path FolderOfA(const std::string& name) {
    const fs::path dir = home_ / name;
    fs::create_directories(dir);
    EXPECT_EQ(chown(dir.c_str(), a_.uid, a_.gid), 0);
    return dir;
  }

  // `gpulane submit --notify end -o LOG -- sh -c SCRIPT` as a; the job id, or -1 and a failure.
  std::int64_t SubmitAsA(const fs::path& log, const std::string& script) {
    RunResult r = d_->GpulaneAs(a_, {"submit", "--notify", "end", "-o", log.string(), "--", "sh", "-c", script},
                                {{"GPULANE_CONFIG", config_.string()}});
    if (r.exit_code != 0 || r.out.empty()) {
      ADD_FAILURE() << "gpulane submit failed: exit " << r.exit_code << ": " << r.err;
      return -1;
    }
    return std::stoll(r.out);
  }

  // The tail job `id`'s notify command got, once it ran (nullopt when it did not within 30 s).
  std::optional<std::string> TailOf(std::int64_t id) {
    const fs::path tail = home_ / fmt::format("tail-{}", id);
    if (!Eventually([&] { return fs::exists(tail); }, 30)) return std::nullopt;
    return ReadFile(tail);
  }

  TestUser a_, b_;
  std::unique_ptr<TestDaemon> d_;
  fs::path home_, config_, secret_dir_;
};

TEST_F(RootReadsNoUserPath, ALogSwappedForASymlinkToARootOnlyFileLeaksNothingIntoTheNotifyTail) {
  const fs::path secret = secret_dir_ / "secret.log";
  // The log itself becomes a symlink to root's file.
  const fs::path log = home_ / "job.log";
  const std::int64_t linked = SubmitAsA(log, fmt::format("echo my output; ln -sf {} {}", secret.string(), log.string()));
  // A folder on the log's way becomes a symlink to root's folder: <sub>/secret.log is root's file.
  const fs::path sub = FolderOfA("sub");
  const std::int64_t through_folder =
      SubmitAsA(sub / "secret.log", fmt::format("echo my output; rm -rf {0}; ln -s {1} {0}", sub.string(), secret_dir_.string()));
  ASSERT_TRUE(d_->WaitForState(linked, "completed"));
  ASSERT_TRUE(d_->WaitForState(through_folder, "completed"));
  for (std::int64_t id : {linked, through_folder}) {
    auto tail = TailOf(id);
    ASSERT_TRUE(tail) << "job " << id << ": the notify command never ran";
    EXPECT_FALSE(Contains(*tail, "TOPSECRET")) << "job " << id << " read root's file through its log: " << *tail;
    EXPECT_EQ(*tail, "") << "job " << id << ": its log is no regular file of its own any more, so no tail";
  }
}

TEST_F(RootReadsNoUserPath, ALogSwappedForAFifoNeitherHangsTheSupervisorNorHoldsBackItsNotification) {
  const fs::path fifo = home_ / "fifo";
  // The log becomes a symlink to a FIFO nobody writes to, or a FIFO itself.
  const fs::path log1 = home_ / "one.log", log2 = home_ / "two.log";
  const std::int64_t via_link =
      SubmitAsA(log1, fmt::format("echo out; mkfifo {0}; ln -sf {0} {1}", fifo.string(), log1.string()));
  const std::int64_t itself = SubmitAsA(log2, fmt::format("echo out; rm {0}; mkfifo {0}", log2.string()));
  ASSERT_TRUE(d_->WaitForState(via_link, "completed"));
  ASSERT_TRUE(d_->WaitForState(itself, "completed"));
  for (std::int64_t id : {via_link, itself}) {
    auto tail = TailOf(id);
    ASSERT_TRUE(tail) << "job " << id << ": the notification never came (its supervisor hangs on the FIFO?)";
    EXPECT_EQ(*tail, "");
  }
  EXPECT_TRUE(Eventually([&] { return d_->SupervisorPids().empty(); }, 15))
      << d_->SupervisorPids().size() << " root supervisor(s) still alive after their jobs ended";
}

TEST_F(RootReadsNoUserPath, ALogLeadingToDevZeroIsNotReadAndTheSupervisorEndsAtOnce) {
  // -o <dev>/zero; the job turns <dev> into a symlink to /dev: the path now names /dev/zero.
  const fs::path dev = FolderOfA("dev");
  const std::int64_t id = SubmitAsA(dev / "zero", fmt::format("echo out; rm -rf {0}; ln -s /dev {0}", dev.string()));
  ASSERT_TRUE(d_->WaitForState(id, "completed"));
  auto tail = TailOf(id);
  ASSERT_TRUE(tail) << "the notification never came (the supervisor reads /dev/zero without end?)";
  EXPECT_EQ(*tail, "");
  EXPECT_TRUE(Eventually([&] { return d_->SupervisorPids().empty(); }, 15)) << "the root supervisor is still alive";
}

TEST_F(RootReadsNoUserPath, AnHonestLogStillGivesItsTail) {
  const fs::path log = home_ / "honest.log";
  const std::int64_t id = SubmitAsA(log, "echo first line; echo last line");
  ASSERT_TRUE(d_->WaitForState(id, "completed"));
  auto tail = TailOf(id);
  ASSERT_TRUE(tail);
  EXPECT_EQ(*tail, "first line\nlast line\n");
}

}  // namespace
}  // namespace gpulane::test
