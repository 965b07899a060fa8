// Fair share for `gpulane run` through the real binary and the fake NVML: a system daemon meters
// alice's `gpulane run` on the one GPU, publishes the users' fair-share factors to the lease line
// (lease/line_shares.h), and bob's `gpulane run`, started after alice's second one, gets the GPU
// first; a folder a user made in the way of fair-share.json while no daemon ran does not switch
// that off (issue 23, item 7), and what the daemon cannot clear is shown by `gpulane status`.
// Needs root (two test users through setpriv); skipped otherwise.
#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class RunFairShare : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = TwoTestUsers(&a_, &b_)) GTEST_SKIP() << *why;
    char dir[] = "/tmp/gpulane-run-fairshare-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    config_dir_ = dir;
    const fs::path config = config_dir_ / "daemon.toml";
    // The sampler meters leases every 200 ms (the default is seconds apart).
    std::ofstream(config) << "[web]\nlisten = \"off\"\n[telemetry]\ninterval = \"200ms\"\n";
    d_ = std::make_unique<TestDaemon>(DaemonOptions{
        .state = IdleGpus(1), .system_mode = true, .start = false, .daemon_env = {{"GPULANE_CONFIG", config.string()}}});
    squat_ = d_->dir() / "leases" / "fair-share.json";
  }
  void TearDown() override {
    if (!squat_.empty()) umount2(squat_.c_str(), MNT_DETACH);  // a test that failed before its unmount
    d_.reset();
    if (!config_dir_.empty()) fs::remove_all(config_dir_);
  }

  // `gpulane run` as `user` of a job that appends `name` to log_ and then waits for gate_.
  Child RunAs(const TestUser& user, const std::string& name) {
    const std::string script =
        fmt::format("echo {} >> {}; while [ ! -e {} ]; do sleep 0.05; done", name, log_.string(), gate_.string());
    return d_->StartGpulaneAs(user, {"run", "-g", "1", "--", "sh", "-c", script});
  }
  std::vector<std::string> Started() const {
    std::vector<std::string> out;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  std::size_t Waiting() const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(d_->dir() / "leases")) n += e.path().extension() == ".wait";
    return n;
  }
  // alice's factor as published in the lease directory, or nullopt before it is.
  std::optional<double> PublishedFactor(const std::string& user) const {
    std::ifstream in(d_->dir() / "leases" / "fair-share.json");
    if (!in) return std::nullopt;
    const json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("factors") || !j["factors"].contains(user)) return std::nullopt;
    return j["factors"][user].get<double>();
  }

  // `mkdir PATH` as `user` (the lease directory is 1777: anyone may).
  void MkdirAs(const TestUser& user, const fs::path& path) {
    const std::string setpriv = fs::exists("/usr/bin/setpriv") ? "/usr/bin/setpriv" : "/bin/setpriv";
    Child c({setpriv, fmt::format("--reuid={}", user.uid), fmt::format("--regid={}", user.gid), "--clear-groups", "--",
             "mkdir", path.string()},
            {});
    auto r = c.Wait(10);
    ASSERT_TRUE(r && r->exit_code == 0) << "mkdir as " << user.name << " failed";
  }
  bool PublishedAsAFile() const { return fs::is_regular_file(fs::symlink_status(squat_)); }

  // alice runs (a1) and waits again (a2); bob comes after: bob's run starts before a2.
  void ExpectTheLightUserFirst();

  TestUser a_, b_;
  fs::path config_dir_, log_, gate_, squat_;
  std::unique_ptr<TestDaemon> d_;
};

void RunFairShare::ExpectTheLightUserFirst() {
  TestDaemon& d = *d_;
  log_ = d.work() / "started.log";
  gate_ = d.work() / "gate";
  std::ofstream(log_).close();
  ASSERT_EQ(chmod(log_.c_str(), 0666), 0);

  Child a1 = RunAs(a_, "a1");
  ASSERT_TRUE(Eventually([&] { return Started().size() == 1; }, 30)) << a1.ErrSoFar();
  // The daemon counts alice's `gpulane run` as her use, and publishes her factor.
  ASSERT_TRUE(Eventually([&] { return PublishedFactor(a_.name).value_or(1) < 1; }, 30)) << d.Log();
  RunResult share = d.Gpulane({"share", "--json"});
  ASSERT_EQ(share.exit_code, 0) << share.err;
  EXPECT_TRUE(Contains(share.out, a_.name)) << "`gpulane share` lists the run's user: " << share.out;

  Child a2 = RunAs(a_, "a2");
  ASSERT_TRUE(Eventually([&] { return Waiting() == 1; }, 30)) << a2.ErrSoFar();
  Child b1 = RunAs(b_, "b1");
  ASSERT_TRUE(Eventually([&] { return Waiting() == 2; }, 30)) << b1.ErrSoFar();

  Touch(gate_);
  for (Child* c : {&a1, &a2, &b1}) {
    auto r = c->Wait(60);
    ASSERT_TRUE(r) << "a run did not end";
    EXPECT_EQ(r->exit_code, 0) << r->err;
  }
  EXPECT_EQ(Started(), (std::vector<std::string>{"a1", "b1", "a2"}))
      << "bob used nothing, alice the whole GPU: bob's later request goes first";
}

TEST_F(RunFairShare, ALightUsersLaterRunGetsTheGpuBeforeAHeavyUsersWaitingOne) {
  ASSERT_TRUE(d_->Start());
  ExpectTheLightUserFirst();
}

TEST_F(RunFairShare, AFolderMadeInPlaceOfFairShareJsonAcrossARestartDoesNotSwitchFairShareOff) {
  // While no daemon runs (a daemon that stops removes the file), alice takes the name.
  MkdirAs(a_, squat_);
  ASSERT_TRUE(d_->Start());
  ASSERT_TRUE(Eventually([&] { return PublishedAsAFile(); }, 30)) << d_->Log();
  ExpectTheLightUserFirst();
  RunResult status = d_->GpulaneAs(b_, {"status"});
  EXPECT_FALSE(Contains(status.out + status.err, "fair share is not published")) << status.out << status.err;
}

TEST_F(RunFairShare, AFairShareJsonTheDaemonCannotClearIsShownByStatusAndPublishingResumesOnceItIsGone) {
  // Something in place of fair-share.json that no rename can move: a mount point (root's doing here,
  // standing for any name the daemon cannot clear).
  MkdirAs(a_, squat_);
  if (mount("tmpfs", squat_.c_str(), "tmpfs", 0, "size=1m") != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  ASSERT_TRUE(d_->Start());
  RunResult status;
  EXPECT_TRUE(Eventually([&] {
    status = d_->GpulaneAs(b_, {"status"});
    return Contains(status.out, "fair share is not published to the lease line");
  }, 30)) << status.out << status.err << d_->Log();
  EXPECT_TRUE(Contains(status.out, "fair-share.json")) << status.out;
  umount2(squat_.c_str(), MNT_DETACH);
  EXPECT_TRUE(Eventually([&] { return PublishedAsAFile(); }, 30)) << d_->Log();
  status = d_->GpulaneAs(b_, {"status"});
  EXPECT_FALSE(Contains(status.out, "fair share is not published")) << status.out;
}

}  // namespace
}  // namespace gpulane::test
