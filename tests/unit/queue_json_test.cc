// The daemon's own JSON text for `gpulane queue --json` (render/queue_json.h) must be byte for byte
// what nlohmann::json's dump(2) prints for the protocol's job objects (store::JobToJson without the
// environment, plus gpu_indices), which is what the command printed before the daemon wrote it.
#include "render/queue_json.h"

#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "store/job_view.h"
#include "util/bytes_json.h"

namespace gpulane {
namespace {

using nlohmann::json;

// What the daemon's JobForClient answers for `job` in a queue listing.
json ProtocolObject(const store::Job& job, const std::vector<unsigned>& gpu_indices) {
  json j = store::JobToJson(job, false);
  j["gpu_indices"] = gpu_indices;
  return j;
}

struct Listed {
  store::Job job;
  std::vector<unsigned> gpu_indices;
};

// The old way: a JSON list of the objects, dump(2), a newline.
std::string Expected(const std::vector<Listed>& jobs) {
  json list = json::array();
  for (const auto& l : jobs) list.push_back(ProtocolObject(l.job, l.gpu_indices));
  // The daemon sent it with invalid UTF-8 replaced; the client printed what it parsed.
  return json::parse(list.dump(-1, ' ', false, json::error_handler_t::replace)).dump(2) + "\n";
}

std::string Rendered(const std::vector<Listed>& jobs) {
  std::string out;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    out += QueueJsonSeparator(i);
    AppendQueueJobJson(jobs[i].job, jobs[i].gpu_indices, out);
  }
  return out + QueueJsonEnd(jobs.size());
}

store::Job Minimal() {
  store::Job job;
  job.id = 7;
  job.gid = 1000;
  job.spec.argv = {"true"};
  job.spec.cwd = "/home/alice";
  job.spec.name = "true";
  job.spec.request.uid = 1000;
  job.spec.request.user = "alice";
  job.spec.request.submit_time_s = 1764598365.25;
  return job;
}

// Every optional field set, and strings that need escaping.
store::Job Everything() {
  store::Job job = Minimal();
  job.id = 123456;
  job.array_job_id = 120000;
  job.array_index = 3456;
  job.state = store::JobState::kFailed;
  job.reason = "exit \"1\"\\ tab\there\nnew line \x01 caf\xc3\xa9 \xe2\x9c\x93 bad \xff\xfe end";
  job.start_time = 1764598366.000001;
  job.end_time = 1764598400.5;
  job.exit_code = -9;
  job.gpu_uuids = {"GPU-8a3f2c1e-1111-2222-3333-444455556666", "GPU-x"};
  job.supervisor_pid = 4242;
  job.logs = {"/home/alice/a.out", "/home/alice/a.err", 10, 20, 1000, 2000};
  job.spec.argv = {"python", "-c", "print(\"hi\")", "", "\xce\xbb"};
  job.spec.env = {"SECRET=1"};
  job.spec.after_ok = {{12, std::nullopt}, {13, 2}};
  job.spec.after_any = {{99, std::nullopt}};
  job.spec.output_path = "logs/%j.out";
  job.spec.error_path = "logs/%j.err";
  job.spec.kill_grace_s = 2.5;
  job.spec.name = "name with \"quotes\"";
  sched::Request& r = job.spec.request;
  r.count = 8;
  r.mem_bytes = 32212254720ULL;
  r.min_free_bytes = 1ULL << 50;
  r.max_util_pct = 0;
  r.share_foreign = true;
  r.order = sched::Order::kPci;
  r.gpu_list = "0,1,GPU-x";
  r.allowed_uuids = std::vector<std::string>{};
  r.priority = -1000000;
  r.time_limit_s = 366.0 * 24 * 3600;
  r.preemptible = sched::Preemptible::kRequeue;
  r.mig_profile = "1g.18gb";
  r.preemptions = 2;
  job.spec.notify = NotifyTarget{{"end", "fail"}, "https://ntfy.example/topic", "text", "notify-send done"};
  job.spec.retries = 3;
  job.attempts.resize(2);
  job.attempts[0].preempted = true;
  return job;
}

TEST(QueueJson, EmptyList) { EXPECT_EQ(Rendered({}), "[]\n"); }

TEST(QueueJson, MinimalJob) {
  std::vector<Listed> jobs = {{Minimal(), {}}};
  EXPECT_EQ(Rendered(jobs), Expected(jobs));
}

TEST(QueueJson, EveryFieldAndEscapes) {
  std::vector<Listed> jobs = {{Everything(), {0, 7}}, {Minimal(), {}}, {Everything(), {}}};
  jobs[2].job.spec.request.allowed_uuids = std::vector<std::string>{"GPU-a", "GPU-\"b\""};
  jobs[2].job.logs.unrecorded = true;  // an old job: its logs are where the default names say
  EXPECT_EQ(Rendered(jobs), Expected(jobs));
}

// Another user's job (store/job_view.h): the streamed text hides what HideFields hides, byte for
// byte as the one-frame listing does.
TEST(QueueJson, AnotherUsersJobHidesItsCommandDirectoryAndLogPathsAsTheOneFrameListingDoes) {
  for (const store::Job& job : {Minimal(), Everything()}) {
    json expected = ProtocolObject(job, {1});
    store::HideFields(expected, {false, true});
    std::string out;
    AppendQueueJobJson(job, {1}, out, /*commands=*/false);
    const std::string list = json::array({expected}).dump(-1, ' ', false, json::error_handler_t::replace);
    EXPECT_EQ(QueueJsonSeparator(0) + out + QueueJsonEnd(1), json::parse(list).dump(2) + "\n");
    EXPECT_EQ(out.find("/home/alice"), std::string::npos) << out;
    EXPECT_NE(out.find("\"argv_hidden\": true"), std::string::npos) << out;
  }
}

TEST(QueueJson, NumbersAsNlohmannPrintsThem) {
  std::vector<Listed> jobs;
  for (double d : {0.0, -0.0, 0.1, 1e-7, 1e21, 1e22, 123456789012345678.0, 10.0, 1.0 / 3,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    store::Job job = Minimal();
    job.spec.request.submit_time_s = d;
    job.spec.kill_grace_s = d;
    job.start_time = -d;
    jobs.push_back({job, {}});
  }
  store::Job big = Minimal();
  big.id = std::numeric_limits<std::int64_t>::max();
  big.spec.request.uid = std::numeric_limits<std::uint32_t>::max();
  big.exit_code = std::numeric_limits<int>::min();
  big.spec.request.mem_bytes = std::numeric_limits<std::uint64_t>::max();
  big.logs = {"/a", "/b", std::numeric_limits<std::uint64_t>::max(), 0, std::nullopt, 0};
  jobs.push_back({big, {std::numeric_limits<unsigned>::max()}});
  EXPECT_EQ(Rendered(jobs), Expected(jobs));
}

// The writer's own string escaping (printable ASCII is copied, the rest goes through the JSON
// library): every C0 control and DEL as JSON writes it (\u00XX or the short forms), so the text
// carries no raw control byte to a terminal, and parsing it gives back the exact bytes.
TEST(QueueJson, ControlCharactersAreJsonEscapesAndReadBackExactly) {
  store::Job job = Minimal();
  job.spec.name = "\x1b]52;c;aGkK\x07";  // OSC 52: write the clipboard
  job.reason.clear();
  for (int c = 1; c < 0x20; ++c) job.reason += static_cast<char>(c);
  job.reason += "\x7f\xc2\x9b";
  std::vector<Listed> jobs = {{job, {}}};
  const std::string rendered = Rendered(jobs);
  EXPECT_EQ(rendered, Expected(jobs));
  EXPECT_NE(rendered.find("\"name\": \"\\u001b]52;c;aGkK\\u0007\""), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("\\u0001\\u0002"), std::string::npos);
  EXPECT_NE(rendered.find("\\b\\t\\n\\u000b\\f\\r"), std::string::npos);
  for (char c : rendered) EXPECT_FALSE((static_cast<unsigned char>(c) < 0x20 && c != '\n')) << static_cast<int>(c);
  const json back = json::parse(rendered);
  EXPECT_EQ(back[0]["spec"]["name"], job.spec.name);
  EXPECT_EQ(back[0]["reason"], job.reason);
}

// argv, directory and log paths that are not UTF-8 are {"b64": ...} objects, as the spec codec
// writes them (util/bytes_json.h), and decode to the exact bytes.
TEST(QueueJson, BytesThatAreNotUtf8AreBase64Objects) {
  store::Job job = Minimal();
  job.spec.argv = {"printf", "%s", "\xff\xfe"};
  job.spec.cwd = "/home/alice/\xff";
  job.logs = {"/home/alice/\xff/gpulane-7.out", "/home/alice/\xff/gpulane-7.out", 0, 0, std::nullopt, std::nullopt};
  std::vector<Listed> jobs = {{job, {}}};
  const std::string rendered = Rendered(jobs);
  EXPECT_EQ(rendered, Expected(jobs));
  const json back = json::parse(rendered);
  EXPECT_EQ(back[0]["spec"]["argv"][2], (json{{"b64", "//4="}}));
  std::vector<std::string> argv;
  ASSERT_TRUE(BytesListFromJson(back[0]["spec"]["argv"], &argv));
  EXPECT_EQ(argv, job.spec.argv);
  std::string cwd, log;
  ASSERT_TRUE(BytesFromJson(back[0]["spec"]["cwd"], &cwd));
  ASSERT_TRUE(BytesFromJson(back[0]["logs"]["stdout_path"], &log));
  EXPECT_EQ(cwd, job.spec.cwd);
  EXPECT_EQ(log, job.logs.stdout_path);
}

// Random jobs: any combination of present and absent fields, random doubles and strings.
TEST(QueueJson, RandomJobs) {
  std::mt19937_64 rng(20261201);
  auto coin = [&] { return rng() % 2 == 0; };
  auto text = [&] {
    static const std::string alphabet = "abc XYZ_-/.%\"\\\t\n\x01\x7f\xc3\xa9\xff";
    std::string s(rng() % 12, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  auto real = [&] { return std::ldexp(static_cast<double>(rng() % 100000000), static_cast<int>(rng() % 80) - 40); };
  std::vector<Listed> jobs;
  for (int i = 0; i < 500; ++i) {
    store::Job job = coin() ? Minimal() : Everything();
    job.id = static_cast<std::int64_t>(rng() % 1000000) + 1;
    job.state = static_cast<store::JobState>(rng() % 8);
    job.reason = text();
    job.spec.request.user = text();
    job.spec.request.submit_time_s = real();
    if (coin()) job.array_index.reset();
    if (coin()) job.array_job_id.reset();
    if (coin()) job.start_time = real();
    if (coin()) job.end_time.reset();
    if (coin()) job.exit_code = static_cast<int>(rng() % 512) - 256;
    if (coin()) job.logs = {text(), text(), rng(), rng() % 100, std::nullopt, rng() % 7};
    if (coin()) job.logs.unrecorded = true;
    job.spec.argv = {text(), text()};
    job.spec.cwd = "/" + text();
    job.spec.kill_grace_s = real();
    job.spec.retries = static_cast<int>(rng() % (store::kMaxRetries + 1));
    job.attempts.resize(coin() ? 0 : rng() % 4);  // a retried job: "attempt"
    for (auto& attempt : job.attempts) attempt.preempted = coin();  // a preempted one: "preemptions"
    job.spec.request.submit_time_s = real();
    if (coin()) job.spec.request.time_limit_s = real();
    if (coin()) job.spec.request.partition = text();
    if (coin()) job.spec.request.mem_bytes.reset();
    if (coin()) job.spec.request.allowed_uuids.reset();
    std::vector<unsigned> indices;
    for (unsigned k = rng() % 3; k > 0; --k) indices.push_back(static_cast<unsigned>(rng() % 8));
    jobs.push_back({job, indices});
  }
  const std::string rendered = Rendered(jobs), expected = Expected(jobs);
  ASSERT_EQ(rendered.size(), expected.size());
  EXPECT_EQ(rendered, expected);
}

}  // namespace
}  // namespace gpulane
