// Privacy by default (issue 23, item 10; docs/security.md, "Privacy"): another local user must not
// read a job's command line (an `--api-key=sk-...` among its arguments), environment, working
// directory or log paths through `show`, `queue`, the daemon's `usage` request or the
// world-readable lease files; hidden fields say so, in text and JSON. The owner, root and, with the
// machine's `daemon.show_commands = true`, everyone see the command line (never the environment).
// The two-user tests need root (a system-mode daemon, gpulane run as two test users through
// setpriv) and are skipped otherwise.
// What the daemon's replies hide with daemon.show_commands and in another user's `wait` is tested
// in-process with peers of any uid: tests/unit/daemon_inproc_privacy_test.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "integration/run_support.h"
#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

constexpr const char* kSecretArg = "--api-key=sk-PRIVATE-4242";
constexpr const char* kSecretEnv = "env-PRIVATE-7777";
constexpr const char* kHidden = "(hidden: another user's job)";

// Whether `text` holds any of the job's secrets: its argument, its environment, its directory.
::testing::AssertionResult LeaksNothing(const std::string& text, const fs::path& cwd) {
  for (const std::string& secret : {std::string("sk-PRIVATE"), std::string(kSecretEnv), cwd.string()})
    if (Contains(text, secret)) return ::testing::AssertionFailure() << "holds " << secret << ": " << text;
  return ::testing::AssertionSuccess();
}

class Privacy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = TwoTestUsers(&a_, &b_)) GTEST_SKIP() << *why;
  }

  // A system-mode daemon with `daemon_config`, and A's job running.
  void Start(const std::string& daemon_config) {
    d_ = std::make_unique<TestDaemon>(DaemonOptions{
        .system_mode = true, .config = daemon_config + "[telemetry]\ninterval = \"100ms\"\n"});
    // The users' own config (the daemon's file may hold keys only the machine's file may set).
    user_config_ = d_->dir() / "user.toml";
    std::ofstream(user_config_) << "";
    fs::permissions(user_config_, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                      fs::perms::others_read);
    gate_ = d_->UserDir(a_) / "gate";
    // A's job: its secret in an argument and in its environment, run in A's folder.
    RunResult r = As(a_, {"submit", "--name", "train", "--", "sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.05; done",
                          gate_.string(), kSecretArg},
                     {{"SECRET_TOKEN", kSecretEnv}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    job_ = std::stoll(r.out);
    ASSERT_TRUE(d_->WaitForState(job_, "running"));
    // "running" is recorded as its GPUs are granted, its log files a moment later (as they open).
    ASSERT_TRUE(Eventually([&] {
      return d_->Call({{"op", "show"}, {"id", std::to_string(job_)}})["job"].contains("logs");
    }, 30)) << d_->Log();
  }

  void TearDown() override {
    if (d_) {
      Touch(gate_);
      d_->Gpulane({"wait", std::to_string(job_)});
    }
  }

  RunResult As(const TestUser& user, const std::vector<std::string>& args, Env extra = {}) {
    extra["GPULANE_CONFIG"] = user_config_.string();
    return d_->GpulaneAs(user, args, extra);
  }

  // One request on a connection made as `user`; null when no reply came.
  json CallAs(const TestUser& user, json request) {
    request["v"] = 2;
    auto c = ConnectAs(d_->socket(), user);
    if (!c || !c->connected() || !c->SendFrame(request.dump())) return nullptr;
    return c->Read(30).value_or(nullptr);
  }

  TestUser a_, b_;
  std::unique_ptr<TestDaemon> d_;
  fs::path user_config_, gate_;
  std::int64_t job_ = 0;
};

TEST_F(Privacy, AnotherUserReadsNoCommandLineEnvironmentDirectoryOrLogPathThroughShowQueueOrUsage) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  const fs::path cwd = d_->UserDir(a_);
  const std::string id = std::to_string(job_);

  // show --json: each hidden field says so, beside a value that says so too.
  RunResult show = As(b_, {"show", "--json", id});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(LeaksNothing(show.out, cwd));
  const json shown = json::parse(show.out);
  for (const char* field : {"argv", "cwd", "output_path", "error_path", "env"}) {
    EXPECT_EQ(shown["spec"][field], kHidden) << field << ": " << show.out;
    EXPECT_EQ(shown["spec"].value(std::string(field) + "_hidden", false), true) << field << ": " << show.out;
  }
  EXPECT_EQ(shown["spec"]["name"], "train") << "names stay public, as in squeue";
  ASSERT_TRUE(shown.contains("logs")) << show.out;
  EXPECT_EQ(shown["logs"].value("stdout_path_hidden", false), true) << show.out;
  EXPECT_EQ(shown["logs"]["stdout_path"], kHidden);

  // show's text: hidden, never empty.
  RunResult text = As(b_, {"show", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(LeaksNothing(text.out, cwd));
  EXPECT_TRUE(Contains(text.out, fmt::format("  command   {}\n", kHidden))) << text.out;
  EXPECT_TRUE(Contains(text.out, fmt::format("  directory {}\n", kHidden))) << text.out;
  EXPECT_TRUE(Contains(text.out, fmt::format("  output    {}\n", kHidden))) << text.out;

  // queue --json (streamed by the daemon) and a queue request answered in one frame.
  RunResult queue = As(b_, {"queue", "--json"});
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_TRUE(LeaksNothing(queue.out, cwd));
  const json listed = json::parse(queue.out);
  ASSERT_EQ(listed.size(), 1u) << queue.out;
  EXPECT_EQ(listed[0]["spec"].value("argv_hidden", false), true) << queue.out;
  EXPECT_EQ(listed[0]["spec"].value("cwd_hidden", false), true) << queue.out;
  const json framed = CallAs(b_, {{"op", "queue"}});
  ASSERT_TRUE(framed.is_object() && framed.value("ok", false)) << framed.dump();
  EXPECT_TRUE(LeaksNothing(framed.dump(), cwd));
  EXPECT_EQ(framed["jobs"][0]["spec"].value("argv_hidden", false), true) << framed.dump();

  // usage: the metered record's name is hidden from B, A's own for A.
  ASSERT_TRUE(Eventually([&] { return d_->Call({{"op", "usage"}, {"job_id", id}}).value("ok", false); }, 30)) << d_->Log();
  const json usage_b = CallAs(b_, {{"op", "usage"}, {"job_id", id}});
  ASSERT_TRUE(usage_b.is_object() && usage_b.value("ok", false)) << usage_b.dump();
  EXPECT_TRUE(LeaksNothing(usage_b.dump(), cwd));
  EXPECT_EQ(usage_b["record"].value("name_hidden", false), true) << usage_b.dump();
  const json usage_a = CallAs(a_, {{"op", "usage"}, {"job_id", id}});
  ASSERT_TRUE(usage_a.is_object() && usage_a.value("ok", false)) << usage_a.dump();
  EXPECT_EQ(usage_a["record"]["name"], "train") << usage_a.dump();

  // The lease files everyone can read: the job's name, never its command line or directory.
  bool saw_lease = false;
  for (const auto& entry : fs::directory_iterator(d_->dir() / "leases")) {
    if (!entry.is_regular_file()) continue;
    const std::string bytes = ReadFile(entry.path());
    EXPECT_TRUE(LeaksNothing(bytes, cwd)) << entry.path();
    if (entry.path().extension() == ".lease") {
      saw_lease = true;
      EXPECT_EQ(json::parse(bytes).value("label", ""), "train") << bytes;
    }
  }
  EXPECT_TRUE(saw_lease);

  // The owner and root see everything.
  for (const RunResult& own : {As(a_, {"show", "--json", id}), d_->Gpulane({"show", "--json", id})}) {
    ASSERT_EQ(own.exit_code, 0) << own.err;
    EXPECT_TRUE(Contains(own.out, kSecretArg)) << own.out;
    EXPECT_TRUE(Contains(own.out, std::string("SECRET_TOKEN=") + kSecretEnv)) << own.out;
    EXPECT_FALSE(Contains(own.out, "_hidden")) << own.out;
  }
  EXPECT_TRUE(Contains(As(a_, {"queue", "--json"}).out, kSecretArg));
}

// Without a daemon: `gpulane run`'s lease file is world-readable (the lease directory is 1777), so
// it holds the program's name and no argument.
TEST(LeasePrivacy, AWorldReadableLeaseFileOfGpulaneRunHoldsNoArgument) {
  FakeMachine machine(IdleMachine(1));
  const Gate gate(machine.dir() / "gate");
  Child run = StartRun(machine, {"--", "/bin/sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.02; done", gate.path(), kSecretArg});
  ASSERT_TRUE(Eventually([&] { return !LeaseDirRecords(machine, ".lease").empty(); }, 30)) << run.ErrSoFar();
  for (const auto& entry : fs::directory_iterator(machine.dir() / "leases"))
    if (entry.is_regular_file()) {
      EXPECT_FALSE(Contains(ReadFile(entry.path()), "sk-PRIVATE")) << entry.path();
    }
  const json lease = LeaseDirRecords(machine, ".lease").at(0);
  EXPECT_EQ(lease.value("label", ""), "sh") << lease.dump();
  // What other readers need is still there: who holds GPU 0.
  RunResult status = RunGpulane({"status"}, RunEnv(machine));
  EXPECT_TRUE(Contains(status.out, fmt::format("job r{} (", run.pid()))) << status.out;
  gate.Open();
  auto done = run.Wait(30);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->exit_code, 0) << done->err;
}

}  // namespace
}  // namespace gpulane::test
