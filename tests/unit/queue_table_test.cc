// The queue table the daemon writes for `gpulane queue` (render/queue_table.h): the client copies it
// to a terminal as it comes, so every field a user chose is escaped there.
#include "render/queue_table.h"

#include <gtest/gtest.h>

namespace gpulane {
namespace {

store::Job Job(const std::string& name) {
  store::Job job;
  job.id = 7;
  job.spec.request.user = "alice";
  job.spec.argv = {"true"};
  job.spec.name = name;
  job.spec.request.submit_time_s = 100;
  return job;
}

std::string Row(const store::Job& job) {
  std::string out;
  AppendQueueRow(job, {}, 100, out);
  return out;
}

TEST(QueueTable, NameUserAndReasonAreEscapedForTheTerminal) {
  store::Job job = Job("a\x1b]52;c;aGkK\x07");
  job.spec.request.user = "bob\x1b[2J";
  job.state = store::JobState::kFailed;
  job.exit_code = 1;
  job.reason = "cannot run '\x1b]0;title\x07\xff'";
  const std::string row = Row(job);
  EXPECT_EQ(row.find('\x1b'), std::string::npos) << row;
  EXPECT_EQ(row.find('\x07'), std::string::npos) << row;
  EXPECT_NE(row.find(" a\\x1b]52;c;aGkK~ "), std::string::npos) << row;  // 15 bytes of the escaped name, then ~
  EXPECT_NE(row.find("bob\\x1b[2J"), std::string::npos) << row;
  EXPECT_NE(row.find("exit 1; cannot run '\\x1b]0;title\\x07\\xff'\n"), std::string::npos) << row;
}

TEST(QueueTable, LongNamesAreCutBetweenCharacters) {
  // 9 two-byte characters: 18 bytes, cut to the 7 whole ones in the first 15 bytes.
  EXPECT_NE(Row(Job("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9")).find(" \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9~ "),
            std::string::npos);
  EXPECT_NE(Row(Job("exactly16bytes..")).find(" exactly16bytes.. "), std::string::npos);
  EXPECT_NE(Row(Job("seventeen-bytes..")).find(" seventeen-bytes~ "), std::string::npos);
}

TEST(QueueTable, ARetriedJobShowsItsAttempt) {
  store::Job job = Job("train");
  job.spec.retries = 3;
  job.state = store::JobState::kRunning;
  EXPECT_EQ(Row(job).find("retry"), std::string::npos) << "the first run says nothing";
  job.attempts.resize(1);
  store::Job running = job;
  running.gpu_uuids = {"GPU-a"};
  std::string out;
  AppendQueueRow(running, {1}, 100, out);
  EXPECT_NE(out.find("  retry 1/3, GPU1\n"), std::string::npos) << out;
  job.state = store::JobState::kPending;
  job.reason = "retry 1 of 3 after exit code 1";
  EXPECT_NE(Row(job).find("  retry 1 of 3 after exit code 1\n"), std::string::npos) << "said once: " << Row(job);
  job.state = store::JobState::kFailed;
  job.attempts.resize(3);
  job.exit_code = 2;
  job.reason = "";
  EXPECT_NE(Row(job).find("  retry 3/3, exit 2\n"), std::string::npos) << Row(job);
}

}  // namespace
}  // namespace gpulane
