// The job id notation (Slurm's): 12, 12_3, 12_[1-3,7]; the one parser of it, and task indices.
#include "store/job_id.h"

#include <gtest/gtest.h>

#include "store/job.h"

namespace gpulane::store {
namespace {

std::vector<JobRef> Refs(const std::string& text) {
  auto refs = ParseJobRefs(text);
  EXPECT_TRUE(refs.ok()) << text << ": " << (refs.ok() ? "" : refs.error().message);
  return refs.ok() ? *refs : std::vector<JobRef>{};
}

TEST(ParseJobRefs, AJobOrAnArray) {
  EXPECT_EQ(Refs("12"), (std::vector<JobRef>{{12, std::nullopt}}));
  EXPECT_EQ(Refs("1"), (std::vector<JobRef>{{1, std::nullopt}}));
  EXPECT_EQ(Refs("0012"), (std::vector<JobRef>{{12, std::nullopt}}));
  EXPECT_EQ(Refs("9223372036854775807"), (std::vector<JobRef>{{INT64_MAX, std::nullopt}}));
}

TEST(ParseJobRefs, OneTask) {
  EXPECT_EQ(Refs("12_3"), (std::vector<JobRef>{{12, 3}}));
  EXPECT_EQ(Refs("12_0"), (std::vector<JobRef>{{12, 0}}));
  EXPECT_EQ(Refs("12_10000000"), (std::vector<JobRef>{{12, 10000000}}));
}

TEST(ParseJobRefs, TasksInBrackets) {
  EXPECT_EQ(Refs("12_[1-3,7]"), (std::vector<JobRef>{{12, 1}, {12, 2}, {12, 3}, {12, 7}}));
  EXPECT_EQ(Refs("12_[3]"), (std::vector<JobRef>{{12, 3}}));
  EXPECT_EQ(Refs("12_[0-6:3]"), (std::vector<JobRef>{{12, 0}, {12, 3}, {12, 6}}));
  EXPECT_EQ(Refs("5_[0-99999]").size(), 100000u);
}

// status and report name a `gpulane run` r<pid> (job r16732): show, wait and cancel were told only
// "give a job id (12), ..." for it. The parser says what the form means, never "kill 16732": only
// the lease directory knows whether that process is a live run (cli/common.h, RunIdError).
TEST(ParseJobRefs, ARunsIdIsRefusedSayingWhatTheFormNamesNeverToKillIt) {
  auto refs = ParseJobRefs("r16732");
  ASSERT_FALSE(refs.ok());
  EXPECT_EQ(refs.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(refs.error().message,
            "job id 'r16732': r<pid> names a `gpulane run`, not a queued job: `gpulane status` lists the runs that hold GPUs");
  EXPECT_TRUE(IsRunId("r16732"));
  EXPECT_FALSE(IsRunId("r") || IsRunId("rx") || IsRunId("16732") || IsRunId("r12_3"));
  EXPECT_FALSE(ParseJobRefs("r").ok());
  EXPECT_EQ(ParseJobRefs("rx").error().message.find("a `gpulane run`"), std::string::npos);
}

TEST(ParseJobRefs, MalformedIdsAreRefusedNamingTheIdAndTheForms) {
  for (const char* bad : {"12_", "_3", "12_x", "-1", "0", "0_1", "", " ", "x", "12 ", " 12", "12_3_4", "12__3", "12_-1",
                          "12_[", "12_[]", "12_[1-3", "12_1-3]", "12_[3-1]", "12_[1,1]", "12_[a]", "12_[1-3]x",
                          "12.5", "+12", "1e3", "12_10000001", "99999999999999999999", "9223372036854775808",
                          "1_99999999999", "12_[0-100000]"}) {
    auto r = ParseJobRefs(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
    const std::string& m = r.error().message;
    EXPECT_NE(m.find(std::string("job id '") + bad + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("12_3"), std::string::npos) << "names the forms expected: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(ParseJobRefs, SaysWhyWhenItKnows) {
  EXPECT_NE(ParseJobRefs("0").error().message.find("start at 1"), std::string::npos);
  EXPECT_NE(ParseJobRefs("99999999999999999999").error().message.find("too large"), std::string::npos);
  EXPECT_NE(ParseJobRefs("12_99999999").error().message.find("up to 10000000"), std::string::npos);
  EXPECT_NE(ParseJobRefs("12_[3-1]").error().message.find("task indices"), std::string::npos);
}

TEST(SplitJobIds, CommasOutsideBracketsSeparateIds) {
  EXPECT_EQ(SplitJobIds("12,13_2, 14_[1-3,7]"), (std::vector<std::string>{"12", "13_2", "14_[1-3,7]"}));
  EXPECT_EQ(SplitJobIds("12"), (std::vector<std::string>{"12"}));
  EXPECT_EQ(SplitJobIds(""), (std::vector<std::string>{}));
  EXPECT_EQ(SplitJobIds("  "), (std::vector<std::string>{}));
  EXPECT_EQ(SplitJobIds("12,,13"), (std::vector<std::string>{"12", "", "13"})) << "the empty id is kept, to be refused";
  EXPECT_EQ(SplitJobIds("12,"), (std::vector<std::string>{"12", ""}));
}

TEST(ParseTaskIndices, TheFormsOfArray) {
  EXPECT_EQ(*ParseTaskIndices("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(*ParseTaskIndices("1,3,5"), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(*ParseTaskIndices("0-9:4"), (std::vector<int>{0, 4, 8}));
  EXPECT_EQ(*ParseTaskIndices("7, 0-1"), (std::vector<int>{7, 0, 1})) << "in the order given";
  EXPECT_EQ(ParseTaskIndices("0-99999")->size(), 100000u);
  for (const char* bad : {"", "3-1", "1,1", "0-3,2", "x", "1-", "-1", "0-9:0", "0-100000", "10000001", "1,,2"}) {
    auto r = ParseTaskIndices(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    EXPECT_NE(r.error().message.find("0-99"), std::string::npos) << r.error().message;
  }
}

TEST(FormatJobRef, AsPeopleWriteIt) {
  EXPECT_EQ(FormatJobRef({12, std::nullopt}), "12");
  EXPECT_EQ(FormatJobRef({12, 3}), "12_3");
  EXPECT_EQ(fmt::format("job {}", JobRef{12, 0}), "job 12_0");
  EXPECT_EQ(FormatTaskIndices({0, 1, 2, 3, 7, 9, 10}), "0-3,7,9-10");
  EXPECT_EQ(FormatTaskIndices({5}), "5");
  EXPECT_EQ(FormatTaskIndices({}), "");
}

TEST(JobId, NeighbouringTasksOfOneArrayAreOneGroupAsShowTakesThem) {
  auto texts = [](const std::vector<IdGroup>& groups) {
    std::vector<std::string> out;
    for (const IdGroup& g : groups) out.push_back(g.text + "/" + std::to_string(g.count));
    return out;
  };
  EXPECT_EQ(texts(GroupTaskIds({"12_0", "12_1", "12_2", "12_7", "15", "16_3", "17_1", "17_2"})),
            (std::vector<std::string>{"12_[0-2,7]/4", "15/1", "16_3/1", "17_[1-2]/2"}));
  EXPECT_EQ(texts(GroupTaskIds({"12_1", "13_2", "12_2"})), (std::vector<std::string>{"12_1/1", "13_2/1", "12_2/1"}))
      << "only neighbours, in the order given";
  EXPECT_EQ(texts(GroupTaskIds({"a_1", "a_2", "12_", "_3", "12"})),
            (std::vector<std::string>{"a_1/1", "a_2/1", "12_/1", "_3/1", "12/1"}))
      << "what is no task stays as given";
  EXPECT_TRUE(GroupTaskIds({}).empty());
}

// A bulk cancel or hold logs its jobs as ranges, one line a part, never one a job.
TEST(FormatJobIdRanges, BoundsTheLineAndCountsTheRest) {
  EXPECT_EQ(FormatJobIdRanges({12, 13, 14, 20}), "12-14,20");
  EXPECT_EQ(FormatJobIdRanges({7}), "7");
  EXPECT_EQ(FormatJobIdRanges({}), "");
  EXPECT_EQ(FormatJobIdRanges({1, 3, 4, 6, 8, 9, 10}, 2), "1,3-4 and 2 more ranges (4 jobs)");
  EXPECT_EQ(FormatJobIdRanges({1, 3, 5}, 2), "1,3 and 1 more range (1 job)");
  std::vector<std::int64_t> many;
  for (std::int64_t id = 0; id < 100000; id += 2) many.push_back(id);
  EXPECT_LT(FormatJobIdRanges(many).size(), 200u);
}

TEST(JobIdText, TasksInTheNotationOtherJobsByNumber) {
  Job job;
  job.id = 15;
  EXPECT_EQ(JobIdText(job), "15");
  job.array_job_id = 12;
  job.array_index = 3;
  EXPECT_EQ(JobIdText(job), "12_3");
  EXPECT_EQ(JobToJson(job, false)["id_text"], "12_3");
  EXPECT_EQ(JobToJson(job, false)["id"], 15) << "the number stays";
}

TEST(SpecDependencies, NumbersAndTasksRoundTrip) {
  JobSpec spec;
  spec.argv = {"true"};
  spec.cwd = "/";
  spec.after_ok = {{12, std::nullopt}, {12, 0}};
  spec.after_any = {{20, 4}};
  nlohmann::json j = SpecToJson(spec);
  EXPECT_EQ(j["after_ok"], nlohmann::json::parse(R"([12, "12_0"])"));
  EXPECT_EQ(j["after_any"], nlohmann::json::parse(R"(["20_4"])"));
  JobSpec back;
  Status parsed = SpecFromJson(j, &back);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(back.after_ok, spec.after_ok);
  EXPECT_EQ(back.after_any, spec.after_any);
  // Protocol clients may write any id the notation takes.
  j["after_ok"] = nlohmann::json::parse(R"(["12", "13_[1-2]", 7])");
  parsed = SpecFromJson(j, &back);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(back.after_ok, (std::vector<JobRef>{{12, std::nullopt}, {13, 1}, {13, 2}, {7, std::nullopt}}));
  for (const char* bad : {R"(["12_"])", R"([0])", R"([-3])", R"([1.5])", R"("12")", R"([null])"}) {
    j["after_ok"] = nlohmann::json::parse(bad);
    Status s = SpecFromJson(j, &back);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().message.find("after_ok"), std::string::npos) << s.error().message;
  }
}

// Found by fuzz_request (UBSan): the daemon read a submission's "array" with get<std::vector<int>>,
// so an index of 1e20 was converted to int with undefined behaviour and one of 2^32 wrapped to 0.
TEST(ArrayIndicesFromJson, OnlyIntegersInRangeEachOnceAreIndices) {
  auto indices = ArrayIndicesFromJson(nlohmann::json::parse("[7, 0, 10000000]"));
  ASSERT_TRUE(indices.ok()) << indices.error().message;
  EXPECT_EQ(*indices, (std::vector<int>{7, 0, 10000000})) << "in the order given";
  for (const char* bad : {"[1e20]", "[118446744073709551615]", "[4294967296]", "[-1]", "[10000001]", "[0.5]", "[1.0]",
                          "[\"3\"]", "[null]", "[[1]]", "[]", "[1, 1]", "\"0-3\"", "3", "{}"}) {
    auto r = ArrayIndicesFromJson(nlohmann::json::parse(bad));
    ASSERT_FALSE(r.ok()) << bad << " read as " << r->size() << " indices";
    EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
    EXPECT_EQ(r.error().message, "--array: give 1 to 100000 different task indices from 0 to 10000000") << bad;
  }
  EXPECT_FALSE(ArrayIndicesFromJson(nlohmann::json(std::vector<int>(kMaxArrayTasks + 1, 0))).ok());
}

// submit --array-file: the daemon takes each task's command from "array_argv" only when there is
// one non-empty list of words per task, none with a NUL byte, within the size limits.
TEST(ArrayArgvFromJson, OneNonEmptyCommandPerTaskOrARefusalThatSaysWhich) {
  auto commands = ArrayArgvFromJson(nlohmann::json::parse(R"([["echo", "a b"], ["true"]])"), 2);
  ASSERT_TRUE(commands.ok()) << commands.error().message;
  ASSERT_EQ(commands->size(), 2u);
  EXPECT_EQ((*commands)[0].get(), (std::vector<std::string>{"echo", "a b"}));
  EXPECT_EQ((*commands)[1].get(), (std::vector<std::string>{"true"}));
  auto refusal = [](const std::string& text, std::size_t tasks) {
    auto r = ArrayArgvFromJson(nlohmann::json::parse(text), tasks);
    EXPECT_FALSE(r.ok()) << text << " accepted";
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_EQ(refusal(R"([["true"]])", 2), "--array-file: give one command (a list of words) for each of the 2 tasks");
  EXPECT_EQ(refusal(R"({"0": ["true"]})", 1), "--array-file: give one command (a list of words) for each of the 1 tasks");
  EXPECT_EQ(refusal(R"([["true"], []])", 2), "--array-file: task 1's command must be a list of one or more words");
  EXPECT_EQ(refusal(R"([["true"], [3]])", 2), "--array-file: task 1's command must be a list of one or more words");
  EXPECT_EQ(refusal(R"([["a\u0000b"]])", 1), "--array-file: task 0's command holds a NUL byte");
  const nlohmann::json big = nlohmann::json::array({nlohmann::json::array({std::string(kMaxArgvBytes, 'x')})});
  EXPECT_NE(refusal(big.dump(), 1).find("task 0's command has"), std::string::npos);
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 8; ++i) many.push_back(nlohmann::json::array({std::string(kMaxArrayArgvBytes / 7, 'x')}));
  EXPECT_NE(refusal(many.dump(), 8).find("split the file into several arrays"), std::string::npos);
}

}  // namespace
}  // namespace gpulane::store
