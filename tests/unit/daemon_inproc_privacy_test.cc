// Privacy by default (issue 23, item 10; docs/security.md, "Privacy") in the daemon's replies,
// in-process (tests/support/inproc_daemon.h): with daemon.show_commands another user sees a job's
// command line but never its environment; another user's `wait` gets no command line, and no
// listing carries a notification target. Were Privacy tests through the binary with two real
// users; the one that reads show's text, the lease files and `usage` stays there
// (tests/integration/privacy_test.cc).
#include <gtest/gtest.h>

#include <filesystem>

#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSecretArg = "--api-key=sk-PRIVATE-4242";
constexpr const char* kSecretEnv = "env-PRIVATE-7777";
constexpr const char* kHidden = "(hidden: another user's job)";
constexpr const char* kTopic = "topic-PRIVATE-5151";

const daemon::Peer kAlice = PeerOf(1001, "alice");
const daemon::Peer kBob = PeerOf(1002, "bob");

class DaemonInProcPrivacy : public InProcDaemonTest {
 protected:
  void SetUp() override {
    InProcDaemonTest::SetUp();
    cwd_ = dir_ / "alice-home";
    fs::create_directories(cwd_);
  }
  // Whether `text` holds any of alice's secrets: her argument, her environment, her directory.
  ::testing::AssertionResult LeaksNothing(const std::string& text) {
    for (const std::string& secret : {std::string("sk-PRIVATE"), std::string(kSecretEnv), cwd_.string()})
      if (Contains(text, secret)) return ::testing::AssertionFailure() << "holds " << secret << ": " << text;
    return ::testing::AssertionSuccess();
  }
  // Alice's job: her secret in an argument and in its environment, run in her folder.
  std::int64_t SubmitAlices(const json& notify = nullptr) {
    json request = SubmitRequest({.argv = {"sh", "-c", "exit 0", "x", kSecretArg},
                                  .name = "train",
                                  .env = {"PATH=/usr/bin:/bin", std::string("SECRET_TOKEN=") + kSecretEnv}});
    request["spec"]["cwd"] = cwd_.string();
    if (!notify.is_null()) request["spec"]["notify"] = notify;
    json reply = Call(kAlice, request);
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return reply.value("ok", false) ? reply["ids"][0].get<std::int64_t>() : 0;
  }
  fs::path cwd_;
};

// Was Privacy.DaemonShowCommandsShowsOtherUsersCommandLinesButNeverTheirEnvironment.
TEST_F(DaemonInProcPrivacy, DaemonShowCommandsShowsOtherUsersCommandLinesButNeverTheirEnvironment) {
  config_.daemon_show_commands = true;
  StartDaemon();
  const std::int64_t job = SubmitAlices();
  Running(job);
  Turn();
  json shown = Call(kBob, {{"op", "show"}, {"id", job}})["job"];
  EXPECT_TRUE(Contains(shown["spec"]["argv"].dump(), kSecretArg)) << shown.dump();
  EXPECT_EQ(shown["spec"]["cwd"], cwd_.string());
  EXPECT_FALSE(shown["spec"].contains("argv_hidden")) << shown.dump();
  EXPECT_EQ(shown["spec"]["env"], kHidden) << "an environment is its owner's alone";
  EXPECT_EQ(shown["spec"].value("env_hidden", false), true);
  EXPECT_FALSE(Contains(shown.dump(), kSecretEnv)) << shown.dump();
  std::string listed;  // `gpulane queue --json`: a streamed listing
  ASSERT_TRUE(CallStreamed(kBob, {{"op", "queue"}, {"stream", "json"}}, &listed).value("ok", false));
  EXPECT_TRUE(Contains(listed, kSecretArg)) << listed;
}

// Was Privacy.AnotherUsersWaitGetsNoCommandLineAndNoListingCarriesTheNotificationTarget: `wait`
// answers with the jobs waited for, and any user may wait for any job; another user's `wait` got
// the job's command line, directory and log paths, and every listing its notification target,
// whose webhook may carry a secret. They come hidden as in `queue`, the target only to its owner.
TEST_F(DaemonInProcPrivacy, AnotherUsersWaitGetsNoCommandLineAndNoListingCarriesTheNotificationTarget) {
  StartDaemon();
  const std::string webhook = std::string("http://127.0.0.1:9/") + kTopic;
  const std::int64_t id = SubmitAlices({{"events", {"end"}}, {"format", "json"}, {"webhook", webhook}});
  RunToEnd(id, 0);
  ASSERT_EQ(State(id), "completed");
  const auto leaks = [&](const std::string& text) { return !LeaksNothing(text) || Contains(text, kTopic); };

  const json waited = Call(kBob, {{"op", "wait"}, {"ids", {id}}});
  ASSERT_TRUE(waited.value("ok", false)) << waited.dump();
  ASSERT_EQ(waited["jobs"].size(), 1u) << waited.dump();
  EXPECT_FALSE(leaks(waited.dump())) << waited.dump();
  EXPECT_EQ(waited["jobs"][0]["spec"].value("argv_hidden", false), true) << waited.dump();
  EXPECT_EQ(waited["jobs"][0]["state"], "completed");

  const json framed = Call(kBob, {{"op", "queue"}, {"all", true}});
  ASSERT_TRUE(framed.value("ok", false)) << framed.dump();
  EXPECT_FALSE(leaks(framed.dump())) << framed.dump();
  const json shown = Call(kBob, {{"op", "show"}, {"id", id}});
  ASSERT_TRUE(shown.value("ok", false)) << shown.dump();
  EXPECT_FALSE(leaks(shown.dump())) << shown.dump();
  EXPECT_EQ(shown["job"]["spec"].value("notify_hidden", false), true) << shown.dump();

  // Its owner: her own command in `wait`'s answer, and the target in `show`.
  const json own = Call(kAlice, {{"op", "wait"}, {"ids", {id}}});
  ASSERT_TRUE(own.value("ok", false)) << own.dump();
  EXPECT_TRUE(Contains(own.dump(), kSecretArg)) << own.dump();
  EXPECT_TRUE(Contains(Call(kAlice, {{"op", "show"}, {"id", id}}).dump(), kTopic));
}

}  // namespace
}  // namespace gpulane::test
