// A job's one codec (store::JobToStoredJson, store::JobFromJson; issue 25 item 4): every field of a
// Job comes back as it went in, the spec file an earlier gpulane wrote is still read (a supervisor
// started by an upgraded daemon may find one), and what cannot be read is an error naming the
// member, never an exception.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "daemon/job_files.h"
#include "os/file_system.h"
#include "proto/request_json.h"
#include "store/job.h"

namespace gpulane::store {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A job with every field set to something other than its default.
Job FullJob() {
  Job job;
  job.id = 15;
  job.array_job_id = 12;
  job.array_index = 3;
  job.own_argv = true;
  job.gid = 1001;
  JobSpec& s = job.spec;
  s.argv = std::vector<std::string>{"python", "train.py", "\xff\xfe"};  // bytes that are not UTF-8
  s.cwd = "/home/alice/w";
  s.env = std::vector<std::string>{"PATH=/usr/bin", "X=\xfe"};
  sched::Request& r = s.request;
  r.count = 2;
  r.mem_bytes = 8ull << 30;
  r.min_free_bytes = 4ull << 30;
  r.max_util_pct = 50;
  r.share_foreign = true;
  r.order = sched::Order::kPci;
  r.gpu_list = "0,1";
  r.allowed_uuids = std::vector<std::string>{"GPU-a", "GPU-b"};
  r.partition = "night";
  r.preemptible = sched::Preemptible::kRequeue;
  r.preemptions = 1;
  r.uid = 1000;
  r.user = "alice";
  r.priority = 3;
  r.submit_time_s = 1764580000.25;
  r.time_limit_s = 3600;
  s.name = "train";
  s.after_ok = std::vector<JobRef>{{11, std::nullopt}, {9, 2}};
  s.after_any = std::vector<JobRef>{{8, std::nullopt}};
  s.output_path = "out-%j.log";
  s.error_path = "err-%j.log";
  s.kill_grace_s = 30;
  s.retries = 2;
  s.notify = NotifyTarget{{"end"}, "https://hooks.example/x", "text", "echo done"};
  job.state = JobState::kRunning;
  job.reason = "retry 1 of 2 after exit code 1";
  job.start_time = 1764580050.5;
  job.end_time = 1764580060.75;
  job.exit_code = 7;
  job.gpu_uuids = {"GPU-a", "GPU-b"};
  job.supervisor_pid = 4242;
  job.logs = {"/home/alice/w/out-15.log", "/home/alice/w/err-15.log", 2048, 512, 4096, 1024, false};
  JobAttempt failed;
  failed.reason = "";
  failed.start_time = 1764580010;
  failed.end_time = 1764580020;
  failed.exit_code = 1;
  failed.gpu_uuids = {"GPU-b"};
  JobAttempt preempted;
  preempted.state = JobState::kPending;
  preempted.reason = "gave way to job 20";
  preempted.start_time = 1764580030;
  preempted.preempted = true;
  job.attempts = {failed, preempted};
  job.isolation = "devices: GPU0, GPU1 only";
  return job;
}

Result<Job> RoundTrip(const Job& job) {
  // Through text, as the spec file holds it.
  return JobFromJson(json::parse(JobToStoredJson(job).dump(-1, ' ', false, json::error_handler_t::replace)));
}

// The round trip of every field: a member the codec drops in either direction fails here (the
// field-by-field checks name it; the last one covers any field added to Job later).
TEST(JobCodec, EveryFieldComesBack) {
  const Job job = FullJob();
  auto back = RoundTrip(job);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->id, job.id);
  EXPECT_EQ(back->array_job_id, job.array_job_id);
  EXPECT_EQ(back->array_index, job.array_index);
  EXPECT_EQ(back->own_argv, job.own_argv);
  EXPECT_EQ(back->uid(), job.uid());
  EXPECT_EQ(back->gid, job.gid);
  EXPECT_EQ(back->user(), job.user());
  EXPECT_TRUE(back->spec.request == job.spec.request) << proto::RequestToJson(back->spec.request).dump();
  EXPECT_TRUE(back->spec == job.spec) << SpecToJson(back->spec).dump();
  EXPECT_EQ(back->state, job.state);
  EXPECT_EQ(back->reason, job.reason);
  EXPECT_EQ(back->submit_time_s(), job.submit_time_s());
  EXPECT_EQ(back->start_time, job.start_time);
  EXPECT_EQ(back->end_time, job.end_time);
  EXPECT_EQ(back->exit_code, job.exit_code);
  EXPECT_EQ(back->gpu_uuids, job.gpu_uuids);
  EXPECT_EQ(back->supervisor_pid, job.supervisor_pid);
  EXPECT_TRUE(back->logs == job.logs) << LogsToJson(back->logs).dump();
  EXPECT_TRUE(back->attempts == job.attempts) << AttemptsToJson(back->attempts).dump();
  EXPECT_EQ(back->isolation, job.isolation);
  EXPECT_TRUE(*back == job) << "a field of Job not checked above was lost: " << JobToStoredJson(*back).dump();
}

// The job's owner is the spec file's "uid" and "user" (the daemon's record of the kernel's word):
// a spec whose request names someone else (a client's claim) or no one reads back as that owner,
// the one copy (Job::uid, Job::user), which its supervisor runs the command as.
TEST(JobCodec, TheOwnerIsTheJobsNotWhatItsRequestNames) {
  json stored = JobToStoredJson(FullJob());
  EXPECT_EQ(stored["uid"], 1000);
  EXPECT_EQ(stored["spec"]["request"]["uid"], 1000) << "the one owner, written in both places";
  for (const json& named : {json{{"uid", 0}, {"user", "root"}}, json::object()}) {
    stored["spec"]["request"].erase("uid");
    stored["spec"]["request"].erase("user");
    stored["spec"]["request"].update(named);
    auto back = JobFromJson(stored);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->uid(), 1000u) << named.dump();
    EXPECT_EQ(back->user(), "alice") << named.dump();
  }
}

// Every member the codec writes for FullJob carries something EveryFieldComesBack checks: without
// it the job reads back different, or not at all. So a writer that dropped any member fails there
// (derived members a client gets, which the reader ignores, are the exception).
TEST(JobCodec, EveryMemberWrittenIsNeeded) {
  const Job job = FullJob();
  const json stored = JobToStoredJson(job);
  for (const auto& [key, value] : stored.items()) {
    if (key == "id_text" || key == "attempt" || key == "preemptions") continue;
    json without = stored;
    without.erase(key);
    auto back = JobFromJson(without);
    EXPECT_TRUE(!back || !(*back == job)) << "\"" << key << "\" is written but not needed to read the job back";
  }
}

// The job as a fresh submission has it (nothing optional set) comes back as it was, not with
// zeros or empty lists where nothing was.
TEST(JobCodec, UnsetFieldsStayUnset) {
  Job job;
  job.id = 1;
  job.spec.request.user = "bob";
  job.spec.argv = std::vector<std::string>{"true"};
  job.spec.cwd = "/";
  auto back = RoundTrip(job);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(*back == job) << JobToStoredJson(*back).dump();
  EXPECT_FALSE(back->array_index || back->start_time || back->exit_code || back->supervisor_pid || back->spec.notify);
}

// A job stored before gpulane recorded its log files: the codec keeps "not recorded", not the
// guess LogsOf (and JobToJson, for clients) makes from its paths.
TEST(JobCodec, UnrecordedLogsStayUnrecorded) {
  Job job = FullJob();
  job.logs = JobLogs{};
  job.logs.unrecorded = true;
  auto back = RoundTrip(job);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->logs.unrecorded);
  EXPECT_TRUE(back->logs.stdout_path.empty()) << back->logs.stdout_path;
  EXPECT_FALSE(JobToJson(job, true)["logs"].is_null()) << "clients get LogsOf's paths";
}

// A job submitted from "/" writes its default log at "/gpulane-4.out" (a new user's trial: show
// and the log's error named "//gpulane-4.out"); other folders are joined with one slash as before.
TEST(JobCodec, ALogPathInTheRootFolderHasOneSlash) {
  Job job;
  job.id = 4;
  job.spec.cwd = "/";
  EXPECT_EQ(OutputPath(job), "/gpulane-4.out");
  job.spec.output_path = "train.log";
  EXPECT_EQ(OutputPath(job), "/train.log");
  job.spec.cwd = "/home/alice";
  EXPECT_EQ(OutputPath(job), "/home/alice/train.log");
  job.spec.output_path = "/abs/out.log";
  EXPECT_EQ(OutputPath(job), "/abs/out.log");
}

// A spec file as gpulane 0d9a374 (and every version since the first) wrote it: JobToJson with the
// environment, plus "gid" and "attempts" (JobFiles::WriteSpec before the one codec), a task of an
// array on its second attempt. Its text, byte for byte, so the codec keeps reading it.
constexpr const char* kOldSpecFile =
    R"({"array_index":3,"array_job_id":12,"attempt":1,"attempts":[{"end_time":1764580100.5,"exit_code":1,)"
    R"("gpu_uuids":["GPU-1111"],"reason":"","start_time":1764580050.25,"state":"failed"}],"gid":1001,)"
    R"("gpu_uuids":[],"id":15,"id_text":"12_3","logs":{"stderr_offset":0,"stderr_path":"/home/alice/run.out",)"
    R"("stdout_offset":2048,"stdout_path":"/home/alice/run.out"},"reason":"retry 1 of 2 after exit code 1",)"
    R"("spec":{"after_any":[],"after_ok":[11,"9_2"],"argv":["python","train.py",{"b64":"/w=="}],)"
    R"("cwd":"/home/alice","env":["PATH=/usr/bin","HOME=/home/alice"],"error_path":"","kill_grace_s":10.0,)"
    R"("name":"train","output_path":"run.out","request":{"count":1,"gpu_list":"","mem_bytes":8589934592,)"
    R"("priority":0,"share_foreign":false,"submit_time_s":1764580000.25,"time_limit_s":3600.0,"uid":1000,)"
    R"("user":"alice"},"retries":2},"state":"launching","submit_time":1764580000.25,"uid":1000,"user":"alice"})";

TEST(JobCodec, ReadsTheSpecFileOfTheEarlierVersion) {
  auto job = JobFromJson(json::parse(kOldSpecFile));
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->id, 15);
  EXPECT_EQ(job->array_job_id, 12);
  EXPECT_EQ(job->array_index, 3);
  EXPECT_EQ(job->uid(), 1000u);
  EXPECT_EQ(job->gid, 1001u);
  EXPECT_EQ(job->user(), "alice");
  EXPECT_EQ(job->submit_time_s(), 1764580000.25);
  EXPECT_EQ(job->state, JobState::kLaunching);
  EXPECT_EQ(job->reason, "retry 1 of 2 after exit code 1");
  EXPECT_EQ(job->spec.argv, (std::vector<std::string>{"python", "train.py", "\xff"}));
  EXPECT_EQ(job->spec.env, (std::vector<std::string>{"PATH=/usr/bin", "HOME=/home/alice"}));
  EXPECT_EQ(job->spec.after_ok, (std::vector<JobRef>{{11, std::nullopt}, {9, 2}}));
  EXPECT_EQ(job->spec.request.mem_bytes, 8589934592u);
  EXPECT_EQ(job->spec.request.time_limit_s, 3600.0);
  EXPECT_EQ(job->spec.retries, 2);
  ASSERT_EQ(job->attempts.size(), 1u) << "the supervisor learns its attempt (GPULANE_RETRY)";
  EXPECT_EQ(job->attempts[0].exit_code, 1);
  EXPECT_EQ(job->attempts[0].gpu_uuids, std::vector<std::string>{"GPU-1111"});
  EXPECT_EQ(job->logs.stdout_path, "/home/alice/run.out");
  EXPECT_EQ(job->logs.stdout_offset, 2048u);
  EXPECT_FALSE(job->logs.unrecorded);
  EXPECT_FALSE(job->own_argv || job->supervisor_pid || job->start_time);
  EXPECT_TRUE(job->isolation.empty());
}

// Each error names the member, and none escapes as an exception.
TEST(JobCodec, ErrorsNameTheMember) {
  const json good = json::parse(kOldSpecFile);
  const auto error_of = [&](const std::function<void(json&)>& change) {
    json j = good;
    change(j);
    auto job = JobFromJson(j);
    return job ? std::string("read") : job.error().message;
  };
  EXPECT_EQ(error_of([](json& j) { j.erase("uid"); }), "job: \"uid\" is missing");
  EXPECT_EQ(error_of([](json& j) { j.erase("gid"); }), "job: \"gid\" is missing");
  EXPECT_EQ(error_of([](json& j) { j["uid"] = -1; }), "job: \"uid\" must be a whole number >= 0");
  EXPECT_EQ(error_of([](json& j) { j["user"] = 7; }), "job: \"user\" must be a string");
  EXPECT_EQ(error_of([](json& j) { j["array_index"] = 1e20; }), "job: \"array_index\" must be a whole number");
  EXPECT_EQ(error_of([](json& j) { j["state"] = "sleeping"; }), "job: \"state\" 'sleeping' is not a job state");
  EXPECT_EQ(error_of([](json& j) { j["gpu_uuids"] = {1}; }), "job: \"gpu_uuids\" must be a string (each element)");
  EXPECT_EQ(error_of([](json& j) { j["spec"].erase("argv"); }).rfind("job: spec: ", 0), 0u);
  EXPECT_EQ(error_of([](json& j) { j["spec"]["request"]["count"] = "two"; }).rfind("job: spec: request: ", 0), 0u);
  EXPECT_EQ(error_of([](json& j) { j["attempts"][0]["exit_code"] = "x"; }),
            "job: attempts[0]: \"exit_code\" must be a whole number");
  EXPECT_EQ(error_of([](json& j) { j["attempts"] = 3; }), "job: attempts: must be a list");
  EXPECT_EQ(error_of([](json& j) { j["logs"]["stdout_end"] = "x"; }), "job: logs: \"stdout_end\" must be a whole number >= 0");
  EXPECT_EQ(error_of([](json& j) { j["logs"]["stdout_path"] = 5; }),
            "job: logs: \"stdout_path\" must be a string or {\"b64\": ...}");
  EXPECT_EQ(JobFromJson(json::array()).error().message, "job: must be a JSON object");
}

// Through the supervisor's spec file: written with the one codec, read back whole; the earlier
// version's file is read; a damaged or foreign one is an error the supervisor records.
class JobFilesSpec : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("job-files-spec-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void WriteFile(const daemon::JobFiles& files, const std::string& text) { std::ofstream(files.spec_path()) << text; }
  os::SystemFileSystem files_;
  fs::path dir_;
};

TEST_F(JobFilesSpec, WrittenAndReadWhole) {
  const Job job = FullJob();
  daemon::JobFiles files(files_, dir_.string(), job.id);
  ASSERT_TRUE(files.WriteSpec(job).ok());
  struct stat st {};
  ASSERT_EQ(stat(files.spec_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "it holds the job's environment";
  auto back = files.ReadSpec();
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(*back == job) << JobToStoredJson(*back).dump();
}

TEST_F(JobFilesSpec, ReadsTheEarlierVersionsFile) {
  daemon::JobFiles files(files_, dir_.string(), 15);
  WriteFile(files, kOldSpecFile);
  auto job = files.ReadSpec();
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->spec.name, "train");
  EXPECT_EQ(job->attempts.size(), 1u);
}

TEST_F(JobFilesSpec, DamagedOrForeignIsAnError) {
  daemon::JobFiles files(files_, dir_.string(), 15);
  EXPECT_EQ(files.ReadSpec().error().kind, ErrorKind::kNotFound);
  WriteFile(files, "{\"id\": 15, ");
  EXPECT_EQ(files.ReadSpec().error().message, "the spec of job 15 is damaged: not JSON");
  json j = json::parse(kOldSpecFile);
  j.erase("submit_time");
  WriteFile(files, j.dump());
  EXPECT_EQ(files.ReadSpec().error().message, "the spec of job 15 is damaged: job: \"submit_time\" is missing");
  daemon::JobFiles other(files_, dir_.string(), 16);
  WriteFile(other, kOldSpecFile);
  EXPECT_EQ(other.ReadSpec().error().message, "the spec of job 16 is damaged: it names job 15");
}

}  // namespace
}  // namespace gpulane::store
