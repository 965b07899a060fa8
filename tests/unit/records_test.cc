// Lease and ticket files as read from the shared lease directory (lease/records.h), where any user
// may write one: numbers that no gpulane writes make the file no record.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lease/records.h"

namespace gpulane::lease {
namespace {

using nlohmann::json;

json Ticket() {
  return json::parse(R"({"id": "r4121-1", "seq": 1764580000250000000, "pid": 4121,
    "request": {"count": 1, "share_foreign": false, "order": "memory", "gpu_list": "", "uid": 1000,
                "user": "alice", "priority": 0, "submit_time_s": 1764580000.25}})");
}

json Lease() {
  return json::parse(R"({"job_id": "r4121", "user": "alice", "pid": 4121, "pgid": 4122, "command": "python",
    "gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-b", "mem_bytes": 21474836480}], "started_s": 1764580000.5})");
}

TEST(LeaseRecords, WellFormedFilesRead) {
  TicketRecord t;
  ASSERT_TRUE(FromJson(Ticket(), &t));
  EXPECT_EQ(t.seq, 1764580000250000000ULL);
  EXPECT_EQ(t.pid, 4121);
  LeaseRecord r;
  ASSERT_TRUE(FromJson(Lease(), &r));
  EXPECT_EQ(r.pgid, 4122);
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus[1].mem_bytes, 21474836480ULL);
}

// A lease's time limit (backfill plans against its end) round-trips; one that is no positive
// finite number of seconds is read as none (an unknown end), never as zero ("ends now").
TEST(LeaseRecords, ATimeLimitRoundTripsAndANonsenseOneIsUnknown) {
  LeaseRecord r;
  ASSERT_TRUE(FromJson(Lease(), &r));
  EXPECT_FALSE(r.time_limit_s) << "absent: no time limit";
  r.time_limit_s = 3600;
  LeaseRecord back;
  ASSERT_TRUE(FromJson(ToJson(r), &back));
  EXPECT_EQ(back.time_limit_s, 3600.0);
  for (const char* limit : {"0", "-5", "1e300", "\"1h\"", "null"}) {
    json j = Lease();
    j["time_limit_s"] = json::parse(limit);
    LeaseRecord odd;
    ASSERT_TRUE(FromJson(j, &odd)) << "still a lease: " << limit;
    EXPECT_FALSE(odd.time_limit_s) << limit;
  }
}

// Found by fuzz_records (UBSan): a seq of 20 digits parses as a float (2.2e19, over 2^64), and
// get<std::uint64_t> converted it with undefined behaviour.
TEST(LeaseRecords, ATicketWhoseSeqIsAFloatIsNoTicket) {
  for (const char* seq : {"21764580000250000000", "1.5", "-1", "1e300"}) {
    json j = Ticket();
    j["seq"] = json::parse(seq);
    TicketRecord t;
    EXPECT_FALSE(FromJson(j, &t)) << seq;
  }
}

// The same for a lease's numbers: mem_bytes as a float over 2^64 (undefined behaviour before), a pid
// of 2^32 + 1 (read as pid 1 before: every process descends from it) or a float pid.
TEST(LeaseRecords, ALeaseWithNumbersOutOfTheirRangeIsNoLease) {
  {
    json j = Lease();
    j["gpus"][1]["mem_bytes"] = json::parse("21764580000250000000");
    LeaseRecord r;
    EXPECT_FALSE(FromJson(j, &r));
  }
  for (const char* pid : {"4294967297", "1.0", "-2147483649", "1e10"}) {
    for (const char* field : {"pid", "pgid"}) {
      json j = Lease();
      j[field] = json::parse(pid);
      LeaseRecord r;
      EXPECT_FALSE(FromJson(j, &r)) << field << " " << pid;
    }
    json t = Ticket();
    t["pid"] = json::parse(pid);
    TicketRecord tr;
    EXPECT_FALSE(FromJson(t, &tr)) << "ticket pid " << pid;
  }
}

// An array task's lease names the task as people write it ("4053_1": job_text) beside its job id, a
// number (GPULANE_JOB_ID, whose task 0 is the array's own id and means every task); an older
// gpulane's lease has none and names its job by job_id; one that is no job id of the notation is
// the owner's word only and is not read (job_id names it then).
TEST(LeaseRecords, AnArrayTasksLeaseNamesTheTaskAndAnOldOrForgedOneFallsBackToTheJobId) {
  LeaseRecord r;
  ASSERT_TRUE(FromJson(Lease(), &r));
  EXPECT_EQ(r.job_text, "") << "an older gpulane's lease has no job_text";
  EXPECT_EQ(JobText(r), "r4121");
  EXPECT_FALSE(ToJson(r).contains("job_text")) << "none written when there is none";
  r.job_id = "4053";
  r.job_text = "4053_0";
  LeaseRecord back;
  ASSERT_TRUE(FromJson(ToJson(r), &back));
  EXPECT_EQ(back.job_id, "4053") << "the job id stays the number";
  EXPECT_EQ(JobText(back), "4053_0");
  EXPECT_EQ(Describe(back), "alice (job 4053_0)");
  for (const char* text : {"\"\"", "\"4053_\"", "\"_1\"", "\"4053_1_2\"", "\"x4053\"", "\"4053 \"", "\"\\u001b[2J\"", "4053",
                           "null", "\"1234567890123456789012345_6789\""}) {
    json j = ToJson(r);
    j["job_text"] = json::parse(text);
    LeaseRecord odd;
    ASSERT_TRUE(FromJson(j, &odd)) << "still a lease: " << text;
    EXPECT_EQ(JobText(odd), "4053") << text;
  }
}

// A ticket names the job that waits, for `status`'s "reserved for job 12 (alice)": written by the
// waiter, read only when it is a job id (a queued job's, an array task's, a `gpulane run`'s "r"
// and digits), else the job is not named.
TEST(Records, ATicketNamesItsJobOnlyByAJobId) {
  TicketRecord t;
  t.id = "w1";
  t.seq = 1;
  t.pid = 42;
  t.request.user = "alice";
  EXPECT_FALSE(ToJson(t).contains("job_text")) << "none written when there is none";
  EXPECT_EQ(DescribeWaiter(t), "a request of alice");
  for (const char* text : {"12", "12_3", "r4121", "p977"}) {
    t.job_text = text;
    TicketRecord back;
    ASSERT_TRUE(FromJson(ToJson(t), &back));
    EXPECT_EQ(back.job_text, text);
    EXPECT_EQ(DescribeWaiter(back), std::string("job ") + text + " (alice)");
  }
  for (const char* text : {"\"\"", "\"r\"", "\"rr1\"", "\"x12\"", "\"12 \"", "\"\\u001b[2J\"", "12", "null",
                           "\"r12345678901234567890123456789\""}) {
    json j = ToJson(t);
    j["job_text"] = json::parse(text);
    TicketRecord odd;
    ASSERT_TRUE(FromJson(j, &odd)) << "still a ticket: " << text;
    EXPECT_EQ(odd.job_text, "") << text;
    EXPECT_EQ(DescribeWaiter(odd), "a request of alice") << text;
  }
}

// `queue` lists a waiting run by its label (the program), read back bounded like a lease's.
TEST(Records, ATicketKeepsItsLabelUpToALeasesBound) {
  TicketRecord t;
  t.id = "w1";
  t.seq = 1;
  t.pid = 42;
  t.label = "python3";
  TicketRecord back;
  ASSERT_TRUE(FromJson(ToJson(t), &back));
  EXPECT_EQ(back.label, "python3");
  json j = ToJson(t);
  j["label"] = std::string(kMaxLeaseLabelBytes + 1, 'x');
  ASSERT_TRUE(FromJson(j, &back));
  EXPECT_EQ(back.label, "") << "over the bound: not read";
}

}  // namespace
}  // namespace gpulane::lease
