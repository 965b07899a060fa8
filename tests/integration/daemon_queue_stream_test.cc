// `gpulane queue` and `queue --json` as the daemon streams them (docs/protocol.md "Streamed
// replies"): the same jobs and the same text as the protocol's one-frame answer, 100,000 jobs as
// valid JSON with every job once, the frames of a stream, other clients served while a client
// takes its time reading one, jobs that end mid-stream listed in their end state, requests behind
// a stream answered after it, and an older daemon's one-frame answer.
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

// The text of a streamed reply on `c` after its header: every part up to the empty frame. A
// frame that does not come within 30 s fails the test.
std::string ReadStream(RawConnection& c, std::size_t* parts = nullptr) {
  std::string text;
  std::size_t n = 0;
  while (true) {
    auto part = c.ReadPayload(30);
    if (!part) {
      ADD_FAILURE() << "the stream stopped after " << n << " parts";
      return text;
    }
    if (part->empty()) break;
    text += *part;
    ++n;
  }
  if (parts) *parts = n;
  return text;
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

// A new user's finding: `queue --all` listed the newest 1000 jobs as if they were all. It says on
// stderr when older ones are left out, and how many (a later finding: it did not say the number),
// and `--limit N` lists the newest N.
TEST(DaemonQueueStream, AllSaysWhenOlderJobsAreLeftOutAndLimitListsMore) {
  TestDaemon d;
  RunResult array = d.Gpulane({"submit", "--hold", "--array", "0-1000", "--", "true"}, {}, 120);
  ASSERT_EQ(array.exit_code, 0) << array.err;
  RunResult all = d.Gpulane({"queue", "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(LineCount(all.out), 1 + 1000);
  EXPECT_NE(all.err.find("the newest 1000 jobs are listed and 1 older one is left out"), std::string::npos) << all.err;
  EXPECT_NE(all.err.find("--limit N"), std::string::npos) << all.err;
  RunResult json_all = d.Gpulane({"queue", "--all", "--json"});
  ASSERT_EQ(json_all.exit_code, 0) << json_all.err;
  EXPECT_EQ(json::parse(json_all.out).size(), 1000u);
  EXPECT_NE(json_all.err.find("1 older one is left out"), std::string::npos) << json_all.err;
  RunResult every = d.Gpulane({"queue", "--all", "--limit", "1001"});
  ASSERT_EQ(every.exit_code, 0) << every.err;
  EXPECT_EQ(LineCount(every.out), 1 + 1001);
  EXPECT_EQ(every.err, "") << "nothing is left out";
  RunResult few = d.Gpulane({"queue", "--all", "--limit", "3"});
  ASSERT_EQ(few.exit_code, 0) << few.err;
  EXPECT_EQ(LineCount(few.out), 1 + 3);
  EXPECT_NE(few.err.find("the newest 3 jobs are listed and 998 older ones are left out"), std::string::npos) << few.err;
  EXPECT_NE(few.out.find("_1000 "), std::string::npos) << "the newest: " << few.out;
  json one_frame = d.Call({{"op", "queue"}, {"all", true}, {"limit", 3}});  // the protocol's one-frame answer says it too
  ASSERT_TRUE(one_frame.value("ok", false)) << one_frame.dump();
  EXPECT_NE(one_frame["warnings"].dump().find("998 older ones are left out"), std::string::npos) << one_frame.dump();
  RunResult alone = d.Gpulane({"queue", "--limit", "3"});
  EXPECT_EQ(alone.exit_code, 2) << alone.out;
  EXPECT_NE(alone.err.find("--all"), std::string::npos) << alone.err;
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

TEST(DaemonQueueStream, FramesOfAStreamThenTheConnectionServesRequestsAgain) {
  TestDaemon d;
  RunResult array = d.Gpulane({"submit", "--hold", "--array", "0-2999", "--", "true"}, {}, 60);
  ASSERT_EQ(array.exit_code, 0) << array.err;
  RawConnection c(d.socket());
  // The stream request and a ping behind it, in one write: the ping is answered after the stream.
  ASSERT_TRUE(c.Send(Frame(R"({"v":2,"op":"queue","stream":"json"})") + Frame(R"({"v":2,"op":"ping"})")));
  auto header = c.Read(30);
  ASSERT_TRUE(header) << "no header";
  EXPECT_EQ(header->value("ok", false), true) << header->dump();
  EXPECT_EQ(header->value("stream", ""), "json");
  EXPECT_EQ(header->value("count", 0), 3000);
  std::size_t parts = 0;
  const std::string text = ReadStream(c, &parts);
  EXPECT_GT(parts, 1u) << "3,000 jobs come in several parts";
  json listed = json::parse(text, nullptr, false);
  ASSERT_TRUE(listed.is_array());
  EXPECT_EQ(listed.size(), 3000u);
  EXPECT_EQ(text, listed.dump(2) + "\n");
  auto pong = c.Read(30);
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->value("pid", -1), d.pid()) << pong->dump();
  // A table stream on the same connection.
  ASSERT_TRUE(c.SendFrame(R"({"v":2,"op":"queue","stream":"table"})"));
  header = c.Read(30);
  ASSERT_TRUE(header && header->value("ok", false));
  EXPECT_EQ(LineCount(ReadStream(c)), 3001);
  // Bad stream kinds are refused like any bad request.
  ASSERT_TRUE(c.SendFrame(R"({"v":2,"op":"queue","stream":"xml"})"));
  auto refused = c.Read(30);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->value("code", ""), "invalid_argument") << refused->dump();
  ASSERT_TRUE(c.SendFrame(R"({"v":2,"op":"queue","stream":"json","user":"no-such-user-gl"})"));
  refused = c.Read(30);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->value("code", ""), "not_found") << refused->dump();
}

TEST(DaemonQueueStream, OthersAreServedWhileAClientTakesItsTimeAndEndedJobsShowTheirEnd) {
  TestDaemon d;
  RunResult array = d.Gpulane({"submit", "--hold", "--array", "0-2999", "--", "true"}, {}, 60);
  ASSERT_EQ(array.exit_code, 0) << array.err;
  const std::int64_t first = std::stoll(array.out);
  RawConnection slow(d.socket());
  ASSERT_TRUE(slow.SendFrame(R"({"v":2,"op":"queue","stream":"json"})"));
  auto header = slow.Read(30);
  ASSERT_TRUE(header && header->value("ok", false));
  // The slow client reads no further: its socket fills up and the daemon waits for it, but serves
  // everyone else meanwhile, and a job submitted now is not part of that listing.
  json ping = d.Call({{"op", "ping"}}, 10);
  EXPECT_EQ(ping.value("ok", false), true) << ping.dump();
  const std::int64_t later = d.Submit({"--hold", "--", "true"});
  RunResult cancel = d.Gpulane({"cancel", std::to_string(first)}, {}, 60);
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  json listed = json::parse(ReadStream(slow), nullptr, false);
  ASSERT_TRUE(listed.is_array());
  ASSERT_EQ(listed.size(), 3000u) << "the jobs queued when it asked";
  std::size_t held = 0, cancelled = 0;
  for (const json& job : listed) {
    EXPECT_NE(job["id"], later);
    held += job["state"] == "held";
    cancelled += job["state"] == "cancelled";
  }
  EXPECT_EQ(held + cancelled, 3000u);
  EXPECT_EQ(listed.back()["state"], "cancelled") << "sent after the cancel: as it is then";
  EXPECT_GT(held, 0u) << "sent before the cancel";
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
