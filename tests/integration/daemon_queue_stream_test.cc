// `gpulane queue` and `queue --json` as the daemon streams them (docs/protocol.md "Streamed
// replies"): the same jobs and the same text as the protocol's one-frame answer, 100,000 jobs as
// valid JSON with every job once, no daemon, and an older daemon's one-frame answer. The frames of
// a stream, requests behind it, other clients served while a client takes its time reading one,
// and what --all leaves out are the daemon's, tested in-process:
// tests/unit/daemon_inproc_queue_stream_test.cc (what `queue --all --limit` prints of the left-out
// jobs stays in DaemonQueue.TableShowsPendingAndRunningJobsButNotFinishedOnes).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fmt/format.h>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

// The table with the AGE column blanked: ages move on between two listings.
std::string WithoutAges(const std::string& table) {
  std::string out;
  for (std::string line : Lines(table)) {
    if (line.size() >= 69) line.replace(61, 8, 8, '.');
    out += line + "\n";
  }
  return out;
}

// A few jobs of every kind the listing shows: held, pending behind a dependency, an array task,
// GPU memory and a time limit, a log path, a name that needs escaping, one that finished.
void SubmitVariety(TestDaemon& d) {
  const std::int64_t done = d.Submit({"--name", "done", "--", "sh", "-c", "exit 3"});
  d.Gpulane({"wait", std::to_string(done)});
  const std::int64_t held = d.Submit({"--hold", "--name", "caf\xc3\xa9 \"quoted\"\ttab", "--", "sleep", "100"});
  d.Submit({"--after", std::to_string(held), "--mem", "20GiB", "--time-limit", "2h", "-o", "logs/%j.out", "--",
            "python", "-c", "print('x')"});
  d.Submit({"--hold", "--array", "0-4,9", "--gpus", "0", "--max-util", "50", "--", "true"});
}

TEST(DaemonQueueStream, JsonIsTheProtocolsJobObjectsLaidOutByDump2) {
  TestDaemon d;
  SubmitVariety(d);
  for (bool all : {false, true}) {
    RunResult r = d.Gpulane(all ? std::vector<std::string>{"queue", "--json", "--all"} : std::vector<std::string>{"queue", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json listed = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(listed.is_array()) << r.out.substr(0, 400);
    EXPECT_EQ(r.out, listed.dump(2) + "\n") << "the layout `queue --json` always had";
    json reply = d.Call({{"op", "queue"}, {"all", all}});
    ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
    EXPECT_EQ(listed, reply["jobs"]) << "the job objects of the protocol's one-frame answer";
    EXPECT_EQ(listed.size(), all ? 9u : 8u);
  }
}

TEST(DaemonQueueStream, TableIsTheOneFrameTable) {
  TestDaemon d;
  SubmitVariety(d);
  for (bool all : {false, true}) {
    RunResult r = d.Gpulane(all ? std::vector<std::string>{"queue", "--all"} : std::vector<std::string>{"queue"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json reply = d.Call({{"op", "queue"}, {"all", all}, {"format", "table"}});
    ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
    EXPECT_EQ(WithoutAges(r.out), WithoutAges(reply["table"].get<std::string>()));
    EXPECT_EQ(LineCount(r.out), all ? 10 : 9) << r.out;
  }
  EXPECT_EQ(LineCount(d.Gpulane({"queue", "--user", UserName(getuid())}).out), 9);
}

TEST(DaemonQueueStream, AHundredThousandJobsAreValidJsonWithEveryJobOnce) {
  TestDaemon d;
  RunResult array = d.Gpulane({"submit", "--hold", "--array", "0-99999", "--", "true"}, {}, 300);
  ASSERT_EQ(array.exit_code, 0) << array.err;
  const std::int64_t first = std::stoll(array.out);
  const std::int64_t single = d.Submit({"--hold", "--name", "single", "--", "true"});
  RunResult r = d.Gpulane({"queue", "--json"}, {}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  json listed = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(listed.is_array()) << "not valid JSON; it ends: " << r.out.substr(r.out.size() > 300 ? r.out.size() - 300 : 0);
  ASSERT_EQ(listed.size(), 100001u);
  std::set<std::int64_t> ids;
  for (const json& job : listed) ids.insert(job["id"].get<std::int64_t>());
  EXPECT_EQ(ids.size(), 100001u) << "every job once";
  EXPECT_EQ(*ids.begin(), first);
  EXPECT_EQ(*ids.rbegin(), single);
  EXPECT_EQ(listed[99999]["id_text"], fmt::format("{}_99999", first));
  EXPECT_EQ(listed[100000]["spec"]["name"], "single");
  RunResult table = d.Gpulane({"queue"}, {}, 300);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(LineCount(table.out), 1 + 100001);
}

TEST(DaemonQueueStream, WithoutADaemonTheQueueIsEmpty) {
  TestDaemon d(DaemonOptions{.start = false});
  RunResult json_out = d.Gpulane({"queue", "--json"});
  EXPECT_EQ(json_out.exit_code, 0) << json_out.err;
  EXPECT_EQ(json_out.out, "[]\n");
  RunResult table = d.Gpulane({"queue"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(LineCount(table.out), 1);
  EXPECT_TRUE(Contains(table.out, "WHERE / WHY")) << table.out;
}

// A daemon from before streamed replies ignores "stream" and answers in one frame.
TEST(DaemonQueueStream, AnOlderDaemonsOneFrameAnswerIsPrintedAsBefore) {
  TestDaemon d(DaemonOptions{.start = false});
  const std::string path = (d.dir() / "old.sock").string();
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  const json jobs = json::parse(R"([{"id": 4, "id_text": "4", "state": "held", "spec": {"argv": ["true"]}}])");
  std::vector<json> requests;
  std::thread old_daemon([&] {
    for (int i = 0; i < 2; ++i) {
      int fd = accept(listener, nullptr, nullptr);
      RawConnection conn(fd);
      auto request = conn.Read(30);
      requests.push_back(request.value_or(json()));
      json reply = {{"v", 2}, {"ok", true}};
      if (request && request->value("format", "") == "table") reply["table"] = "OLD TABLE\n";
      else reply["jobs"] = jobs;
      conn.SendFrame(reply.dump());
    }
  });
  const Env old = {{"GPULANE_SOCKET", path}, {"GPULANE_SYSTEM_DAEMON", "0"}};
  RunResult as_json = d.Gpulane({"queue", "--json"}, old);
  RunResult table = d.Gpulane({"queue"}, old);
  old_daemon.join();
  close(listener);
  EXPECT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_EQ(as_json.out, jobs.dump(2) + "\n");
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out, "OLD TABLE\n");
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].value("stream", ""), "json");
  EXPECT_EQ(requests[1].value("stream", ""), "table");
}

}  // namespace
}  // namespace gpulane::test
