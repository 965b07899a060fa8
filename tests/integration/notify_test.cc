// Notifications through the real binary (issue 11, item 4): submit --notify posts to a webhook on
// 127.0.0.1 (a local HTTP server of the test) and runs a command as the job's user, with the
// event, the job and the end of its log; an anomaly of a running job is sent too; bad --notify
// values are refused before anything is queued.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// An HTTP server on 127.0.0.1 that answers 200 to every POST and appends its body (one line of
// JSON: {"path", "content_type", "body"}) to `log`; its port is written to `port_file`.
Child WebhookServer(const fs::path& log, const fs::path& port_file) {
  const std::string script = R"(
import http.server, json, sys
log, port_file = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0))).decode()
        with open(log, 'a') as f:
            f.write(json.dumps({'path': self.path, 'content_type': self.headers.get('Content-Type'), 'body': body}) + '\n')
        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')
    def log_message(self, *a): pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
open(port_file + '.tmp', 'w').write(str(s.server_port)); __import__('os').rename(port_file + '.tmp', port_file)
s.serve_forever()
)";
  return StartProcess({"/usr/bin/python3", "-c", script, log.string(), port_file.string()});
}

std::vector<json> Posts(const fs::path& log) {
  std::vector<json> out;
  for (const auto& line : Lines(ReadFile(log))) out.push_back(json::parse(line));
  return out;
}

struct Webhook {
  fs::path log, port_file;
  Child server;
  std::string url;
  explicit Webhook(const fs::path& dir)
      : log(dir / "posts.jsonl"), port_file(dir / "port"), server(WebhookServer(log, port_file)) {
    EXPECT_TRUE(Eventually([&] { return !ReadFile(port_file).empty(); }, 30)) << "the test's HTTP server did not start";
    url = fmt::format("http://127.0.0.1:{}/hook", ReadFile(port_file));
  }
};

TEST(Notify, AFailedJobPostsItsEndWithTheTailOfItsLogAndACompletedOneRunsTheCommand) {
  TestDaemon d;
  Webhook hook(d.dir());
  const fs::path env_out = d.work() / "notified.env";
  const fs::path config = d.dir() / "user.toml";
  std::ofstream(config) << fmt::format("[notify]\nwebhook = \"{}\"\ncommand = \"env | grep ^GPULANE_ | sort > {}\"\n",
                                       hook.url, env_out.string());
  const Env user = {{"GPULANE_CONFIG", config.string()}};
  const std::int64_t failing = d.Submit({"--notify", "fail", "--name", "train", "--", "sh", "-c", "echo boom >&2; exit 3"}, user);
  ASSERT_TRUE(d.WaitForState(failing, "failed"));
  ASSERT_TRUE(Eventually([&] { return !Posts(hook.log).empty(); }, 30)) << d.Log();
  json post = Posts(hook.log).front();
  EXPECT_EQ(post["path"], "/hook");
  EXPECT_EQ(post["content_type"], "application/json");
  json body = json::parse(post["body"].get<std::string>());
  EXPECT_EQ(body["text"], fmt::format("gpulane: job {} (train) of {} failed with exit code 3", failing, UserName(getuid())));
  EXPECT_EQ(body["content"], body["text"]) << "Discord's field too";
  EXPECT_EQ(body["event"], "fail");
  EXPECT_EQ(body["exit_code"], 3);
  EXPECT_EQ(body["log_tail"], "boom\n");
  // The command ran too, with the event in its environment.
  ASSERT_TRUE(Eventually([&] { return Contains(ReadFile(env_out), "GPULANE_MESSAGE="); }, 30));
  EXPECT_TRUE(Contains(ReadFile(env_out), "GPULANE_EVENT=fail\n")) << ReadFile(env_out);

  // --notify fail: a job that completes sends nothing; --notify end: it does.
  fs::remove(env_out);
  const std::int64_t quiet = d.Submit({"--notify", "fail", "--", "true"}, user);
  const std::int64_t told = d.Submit({"--notify", "end", "--", "true"}, user);
  ASSERT_TRUE(d.WaitForState(quiet, "completed"));
  ASSERT_TRUE(d.WaitForState(told, "completed"));
  ASSERT_TRUE(Eventually([&] { return Posts(hook.log).size() >= 2; }, 30));
  ASSERT_TRUE(Eventually([&] { return Contains(ReadFile(env_out), "GPULANE_JOB_STATE="); }, 30));
  EXPECT_TRUE(Contains(ReadFile(env_out), fmt::format("GPULANE_JOB_ID={}\n", told))) << ReadFile(env_out);
  EXPECT_TRUE(Contains(ReadFile(env_out), "GPULANE_JOB_STATE=completed\n")) << ReadFile(env_out);
  EXPECT_TRUE(Contains(ReadFile(env_out), "GPULANE_EXIT_CODE=0\n")) << ReadFile(env_out);
  EXPECT_EQ(Posts(hook.log).size(), 2u) << "one post per end, none for the job that wanted failures only";
}

TEST(Notify, AnAnomalyOfARunningJobIsSentAsPlainTextWhenAsked) {
  DaemonOptions options;
  options.config = "[telemetry]\ninterval = \"100ms\"\n[anomaly]\nidle_after = \"1s\"\n";
  TestDaemon d(options);
  Webhook hook(d.dir());
  const fs::path config = d.dir() / "user.toml";
  std::ofstream(config) << fmt::format("[notify]\nwebhook = \"{}\"\nformat = \"text\"\n", hook.url);
  const fs::path gate = d.work() / "gate";
  const std::int64_t id = d.Submit({"--notify", "anomaly", "--gpus", "0", "--", "sh", "-c",
                                    fmt::format("while [ ! -e {} ]; do sleep 0.05; done", gate.string())},
                                   {{"GPULANE_CONFIG", config.string()}});
  ASSERT_TRUE(d.WaitForState(id, "running"));
  // GPU 0 stays at 0 %: idle after 1 s; the supervisor asks every 5 s.
  ASSERT_TRUE(Eventually([&] { return !Posts(hook.log).empty(); }, 60)) << d.Log();
  json post = Posts(hook.log).front();
  EXPECT_TRUE(Contains(post["content_type"].get<std::string>(), "text/plain")) << post.dump();
  EXPECT_TRUE(Contains(post["body"].get<std::string>(), fmt::format("gpulane: job {} (", id))) << post.dump();
  EXPECT_TRUE(Contains(post["body"].get<std::string>(), "has used GPU 0 under 5 %")) << post.dump();
  Touch(gate);
  ASSERT_TRUE(d.WaitForState(id, "completed"));
}

TEST(Notify, BadNotifyValuesAreRefusedBeforeAnythingIsQueued) {
  TestDaemon d;
  const fs::path config = d.dir() / "user.toml";
  std::ofstream(config) << "[notify]\nwebhook = \"http://127.0.0.1:9/x\"\n";
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--notify", "finish", "--", "true"}, {{"GPULANE_CONFIG", config.string()}}), 2,
                             "--notify finish: 'finish' is no event; give end, fail and/or anomaly"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--notify", "end", "--", "true"}), 2,
                             "--notify end: nowhere to send it: set notify.webhook"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"run", "--notify", "end", "--", "true"}), 2, "nowhere to send it"));
  std::ofstream(config) << "[notify]\nwebhook = \"ftp://example/x\"\n";
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--notify", "end", "--", "true"}, {{"GPULANE_CONFIG", config.string()}}), 2,
                             "notify.webhook must be an http:// or https:// URL"));
  EXPECT_TRUE(d.Queue().empty()) << "nothing queued";
}

}  // namespace
}  // namespace gpulane::test
