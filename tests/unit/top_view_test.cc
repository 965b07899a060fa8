// `gpulane top`'s screen (render/top_view.h) and keys (render/top_keys.h): every line fits the
// terminal, hostile names reach it escaped, NO_COLOR means no colour codes, unknown readings show
// as unknown, sorting and the user filter, and what each key does.
#include "render/top_view.h"

#include <gtest/gtest.h>

#include "render/top_keys.h"
#include "util/display_width.h"

namespace gpulane {
namespace {

constexpr double kNow = 1'800'000'000;

TopModel TwoGpus() {
  TopModel m;
  m.hostname = "gpu-box";
  m.now_s = kNow;
  m.driver_version = "570.86";
  TopGpu g0;
  g0.index = 0;
  g0.name = "NVIDIA H200";
  g0.util_pct = 70;
  g0.memory_used_bytes = 30ULL << 30;
  g0.memory_total_bytes = 140ULL << 30;
  g0.temperature_c = 45;
  g0.power_mw = 300000;
  g0.power_limit_mw = 700000;
  g0.holders = "job 12 (alice)";
  TopGpu g1 = g0;
  g1.index = 1;
  g1.util_pct = std::nullopt;  // not reported
  g1.memory_used_bytes = std::nullopt;
  g1.holders = "";
  m.gpus = {g0, g1};
  m.processes = {{0, 4242, "alice", "12", 3ULL << 30, 70.0, "python train.py"},
                 {1, 777, "bob", "", 5ULL << 30, std::nullopt, "python eval.py"},
                 {0, 99, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt}};
  m.queue_known = true;
  m.jobs = {{"12", "alice", "train", "running", "1", 125.0, "GPU0"}, {"13_2", "bob", "sweep", "pending", "1x20.0 GiB", 5.0, "waiting for GPUs"}};
  return m;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The line that starts with `prefix` ("" when none).
std::string LineStarting(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0) return l;
  return "";
}

std::size_t RowOf(const std::vector<std::string>& lines, const std::string& part) {
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(part) != std::string::npos) return i;
  return lines.size();
}

TEST(TopView, EveryLineFitsTheTerminalAndTheScreenIsFilledToItsHeight) {
  TopModel m = TwoGpus();
  m.has_history = true;
  m.gpus[0].history = {{kNow - 100, 50.0, 1e9}, {kNow - 10, 90.0, 2e9}};
  m.gpus[0].name = "NVIDIA H100 80GB HBM3 with a name longer than any column";
  for (std::size_t width : {20u, 40u, 80u, 120u, 200u})
    for (std::size_t height : {1u, 5u, 12u, 40u})
      for (bool unicode : {true, false}) {
        const auto lines = RenderTop(m, {}, {false, unicode}, width, height);
        ASSERT_EQ(lines.size(), height) << width << "x" << height;
        for (const auto& l : lines) EXPECT_LE(DisplayColumns(l), width) << width << "x" << height << ": " << l;
      }
  EXPECT_TRUE(RenderTop(m, {}, {}, 0, 10).empty());
}

TEST(TopView, ShowsEachGpuItsProcessesAndTheQueue) {
  const auto lines = RenderTop(TwoGpus(), {}, {false, true}, 160, 40);
  const std::string gpu0 = LineStarting(lines, " 0 NVIDIA H200");
  EXPECT_NE(gpu0.find("UTIL ["), std::string::npos) << gpu0;
  EXPECT_NE(gpu0.find("]  70%"), std::string::npos) << gpu0;
  EXPECT_NE(gpu0.find("30.0/140.0 GiB"), std::string::npos) << gpu0;
  EXPECT_NE(gpu0.find(" 45°C"), std::string::npos) << gpu0;
  EXPECT_NE(gpu0.find("300/700 W"), std::string::npos) << gpu0;
  EXPECT_NE(gpu0.find("job 12 (alice)"), std::string::npos) << gpu0;
  EXPECT_NE(LineStarting(lines, "  0    4242 alice      12          3.0 GiB  70%  python train.py"), "") << Joined(lines);
  EXPECT_NE(LineStarting(lines, "  1     777 bob        -           5.0 GiB    -  python eval.py"), "") << Joined(lines);
  EXPECT_NE(LineStarting(lines, "  0      99 ?          -                 -    -  (not visible here)"), "") << Joined(lines);
  EXPECT_NE(LineStarting(lines, "      12 alice      train            1          running     2m 05s  GPU0"), "") << Joined(lines);
  EXPECT_NE(RowOf(lines, "QUEUE  2 jobs: 1 running, 1 waiting"), lines.size()) << Joined(lines);
  EXPECT_NE(lines.back().find("q quit"), std::string::npos) << lines.back();
  // 80 columns: temperature and power give way to the lease holders.
  const std::string narrow = LineStarting(RenderTop(TwoGpus(), {}, {false, true}, 80, 40), " 0 NVIDIA H200");
  EXPECT_NE(narrow.find("]  70%"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("job 12 (alice)"), std::string::npos) << narrow;
  EXPECT_EQ(narrow.find("°C"), std::string::npos) << narrow;
}

TEST(TopView, AbsentReadingsAreShownAsUnknownNotAsZero) {
  const auto lines = RenderTop(TwoGpus(), {}, {false, true}, 160, 40);
  const std::string gpu1 = LineStarting(lines, " 1 NVIDIA H200");
  ASSERT_NE(gpu1, "") << Joined(lines);
  EXPECT_NE(gpu1.find("UTIL [n/a"), std::string::npos) << gpu1;
  EXPECT_NE(gpu1.find("]    -  MEM [n/a"), std::string::npos) << gpu1;
  EXPECT_NE(gpu1.find("-/140.0 GiB"), std::string::npos) << gpu1;
  EXPECT_EQ(gpu1.find(" 0%"), std::string::npos) << gpu1;
  TopModel m = TwoGpus();
  m.gpus[1].processes_known = false;
  m.gpus[1].temperature_c = std::nullopt;
  m.gpus[1].power_mw = std::nullopt;
  const std::string line = LineStarting(RenderTop(m, {}, {false, true}, 200, 40), " 1 NVIDIA H200");
  EXPECT_NE(line.find("  -°C    -/700 W  processes unknown"), std::string::npos) << line;
}

TEST(TopView, SparklinesFollowTheHistoryOnlyWhenThereIsHistory) {
  TopModel m = TwoGpus();
  m.span_s = 300;
  m.sample_interval_s = 1;
  auto lines = RenderTop(m, {}, {false, true}, 120, 40);
  EXPECT_EQ(RowOf(lines, "5m ["), lines.size()) << "no history: no sparkline lines\n" << Joined(lines);
  m.has_history = true;
  for (int t = 300; t > 0; --t) m.gpus[0].history.push_back({kNow - t, t > 150 ? 0.0 : 100.0, 70.0 * (1ULL << 30)});
  lines = RenderTop(m, {}, {false, true}, 120, 40);
  const std::size_t row = RowOf(lines, "5m [");
  ASSERT_LT(row, lines.size()) << Joined(lines);
  EXPECT_NE(lines[row - 1].find(" 0 NVIDIA H200"), std::string::npos) << "under its GPU\n" << Joined(lines);
  const std::string& spark = lines[row];
  // Idle for the first half, busy for the second; memory steady at half the GPU.
  EXPECT_NE(spark.find("[▁▁▁"), std::string::npos) << spark;
  EXPECT_NE(spark.find("███]"), std::string::npos) << spark;
  EXPECT_NE(spark.find("[▅▅▅"), std::string::npos) << spark;  // 70 of 140 GiB: level 3.5 of 7, rounded up
  // GPU 1 has no history of its own: a blank sparkline, not a line of zeros.
  const std::string& spark1 = lines[RowOf(lines, " 1 NVIDIA H200") + 1];
  EXPECT_EQ(spark1.find("▁"), std::string::npos) << spark1;
}

TEST(TopView, HostileNamesAreEscapedAndNoColorMeansNoEscapeCodesAtAll) {
  TopModel m = TwoGpus();
  m.hostname = "box\x1b]0;owned\x07";
  m.gpus[0].name = "H200\x1b[2J";
  m.gpus[0].holders = "job 12 (\x1b[31mmallory)";
  m.processes[0].user = "mal\x9blory";
  m.processes[0].command = "python \x1b]52;c;aGkK\x07 train.py";
  m.processes[0].job_id = "12\r";
  m.jobs[0].name = "train\x1b[?1049l";
  m.jobs[0].where = "GPU0\n";
  m.notes = {"warning: job 17 cannot be read from the job store: \x1b]0;x\x07"};
  for (bool unicode : {true, false}) {
    const std::string text = Joined(RenderTop(m, {}, {false, unicode}, 200, 40));
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos) << text;
    EXPECT_NE(text.find("python \\x1b]52;c;aGkK\\x07 train.py"), std::string::npos) << text;
    EXPECT_NE(text.find("train\\x1b[?1049l"), std::string::npos) << text;
  }
  // With colour, the only escape sequences are gpulane's own SGR codes.
  const std::string colored = Joined(RenderTop(m, {}, {true, true}, 200, 40));
  EXPECT_NE(colored.find("\x1b[32m"), std::string::npos) << colored;
  for (std::size_t at = colored.find('\x1b'); at != std::string::npos; at = colored.find('\x1b', at + 1)) {
    const std::size_t end = colored.find_first_not_of("0123456789;", at + 2);
    ASSERT_EQ(colored[at + 1], '[') << colored.substr(at, 20);
    EXPECT_EQ(colored[end], 'm') << colored.substr(at, 20);
  }
  EXPECT_EQ(colored.find("\x1b[2J"), std::string::npos);
}

TEST(TopView, ProcessesSortByTheChosenKeyUnknownLastAndFilterByUser) {
  const TopModel m = TwoGpus();
  auto pids = [&](const TopUi& ui) {
    std::vector<std::uint32_t> out;
    for (const auto& p : SortedProcesses(m.processes, ui)) out.push_back(p.pid);
    return out;
  };
  EXPECT_EQ(pids({}), (std::vector<std::uint32_t>{99, 4242, 777}));  // GPU, then pid
  EXPECT_EQ(pids({TopSort::kMemory}), (std::vector<std::uint32_t>{777, 4242, 99}));
  EXPECT_EQ(pids({TopSort::kMemory, true}), (std::vector<std::uint32_t>{4242, 777, 99})) << "unknown stays last";
  EXPECT_EQ(pids({TopSort::kUtil}), (std::vector<std::uint32_t>{4242, 99, 777}));
  EXPECT_EQ(pids({TopSort::kUser}), (std::vector<std::uint32_t>{4242, 777, 99}));
  EXPECT_EQ(pids({TopSort::kPid}), (std::vector<std::uint32_t>{99, 777, 4242}));
  EXPECT_EQ(pids({TopSort::kGpu, true}), (std::vector<std::uint32_t>{777, 99, 4242}));
  TopUi bob{TopSort::kGpu, false, "bob"};
  EXPECT_EQ(pids(bob), (std::vector<std::uint32_t>{777}));
  const auto lines = RenderTop(m, bob, {false, true}, 160, 40);
  EXPECT_NE(RowOf(lines, "PROCESSES  1 of 3  sorted by gpu"), lines.size()) << Joined(lines);
  EXPECT_EQ(RowOf(lines, "alice      train"), lines.size()) << "the queue is filtered too\n" << Joined(lines);
  EXPECT_NE(RowOf(lines, "bob        sweep"), lines.size()) << Joined(lines);
  EXPECT_NE(lines[0].find("user bob"), std::string::npos) << lines[0];
  const auto nobody = RenderTop(m, {TopSort::kGpu, false, "carol"}, {false, true}, 160, 40);
  EXPECT_NE(RowOf(nobody, "(no processes of carol)"), nobody.size()) << Joined(nobody);
}

TEST(TopView, ASmallTerminalCutsSectionsWithACountOfWhatIsLeftOut) {
  TopModel m = TwoGpus();
  for (std::uint32_t pid = 1000; pid < 1030; ++pid) m.processes.push_back({0, pid, "carol", "", 1ULL << 30, 10.0, "worker"});
  const auto lines = RenderTop(m, {}, {false, true}, 100, 16);
  ASSERT_EQ(lines.size(), 16u);
  EXPECT_NE(RowOf(lines, " more"), lines.size()) << Joined(lines);
  EXPECT_NE(RowOf(lines, "QUEUE"), lines.size()) << "the queue keeps a few lines\n" << Joined(lines);
  EXPECT_NE(lines.back().find("q quit"), std::string::npos);
  // Too short for every GPU: a count of the rest.
  m.gpus.resize(8, m.gpus[0]);
  const auto tiny = RenderTop(m, {}, {false, true}, 100, 5);
  EXPECT_NE(RowOf(tiny, "... 6 more GPUs"), tiny.size()) << Joined(tiny);
}

TEST(TopView, NotesAndTheFilterPromptAreShown) {
  TopModel m = TwoGpus();
  m.queue_known = false;
  m.notes = {"no gpulane daemon answers: readings straight from NVML"};
  TopUi ui;
  ui.editing = true;
  ui.edit_text = "ali";
  const auto lines = RenderTop(m, ui, {false, true}, 120, 30);
  EXPECT_EQ(lines[1], "no gpulane daemon answers: readings straight from NVML");
  EXPECT_EQ(RowOf(lines, "QUEUE"), lines.size()) << "no daemon, no queue section";
  EXPECT_NE(lines.back().find("filter by user"), std::string::npos) << lines.back();
  EXPECT_NE(lines.back().find(": ali_"), std::string::npos) << lines.back();
}

TEST(TopKeys, DecodesTextEnterBackspaceEscapeAndSkipsEscapeSequences) {
  auto keys = DecodeTopKeys("m\x1b[A\x1bOPé\r\x7f\x1b");
  ASSERT_EQ(keys.size(), 7u);
  EXPECT_EQ(keys[0].kind, TopKey::kText);
  EXPECT_EQ(keys[0].text, "m");
  EXPECT_EQ(keys[1].kind, TopKey::kOther);  // an arrow key, not Esc [ A
  EXPECT_EQ(keys[2].kind, TopKey::kOther);  // F1
  EXPECT_EQ(keys[3].text, "é");
  EXPECT_EQ(keys[4].kind, TopKey::kEnter);
  EXPECT_EQ(keys[5].kind, TopKey::kBackspace);
  EXPECT_EQ(keys[6].kind, TopKey::kEscape);
  EXPECT_EQ(DecodeTopKeys("\xff")[0].kind, TopKey::kOther);
}

TEST(TopKeys, SortReverseFilterAndQuit) {
  TopUi ui;
  auto press = [&](std::string_view bytes) {
    TopAction last = TopAction::kNone;
    for (const TopKey& k : DecodeTopKeys(bytes)) last = ApplyTopKey(ui, k);
    return last;
  };
  EXPECT_EQ(press("m"), TopAction::kRedraw);
  EXPECT_EQ(ui.sort, TopSort::kMemory);
  press("u");
  EXPECT_EQ(ui.sort, TopSort::kUtil);
  press("n");
  EXPECT_EQ(ui.sort, TopSort::kUser);
  press("p");
  EXPECT_EQ(ui.sort, TopSort::kPid);
  press("r");
  EXPECT_TRUE(ui.reverse);
  press("g");
  EXPECT_EQ(ui.sort, TopSort::kGpu);
  EXPECT_EQ(press("x"), TopAction::kNone);
  // The prompt: typed text, Backspace over a two-byte character, Enter applies.
  press("fbobé");
  EXPECT_TRUE(ui.editing);
  EXPECT_EQ(ui.edit_text, "bobé");
  press("\x7f\r");
  EXPECT_FALSE(ui.editing);
  EXPECT_EQ(ui.user_filter, "bob");
  EXPECT_EQ(press("q"), TopAction::kQuit) << "q quits once the prompt is closed";
  // Keys at the prompt are text, not commands; Esc cancels it, and Esc outside clears the filter.
  EXPECT_EQ(press("/q"), TopAction::kRedraw);
  EXPECT_EQ(ui.edit_text, "bobq");
  press("\x1b");
  EXPECT_FALSE(ui.editing);
  EXPECT_EQ(ui.user_filter, "bob");
  press("\x1b");
  EXPECT_EQ(ui.user_filter, "");
  press("f\r");
  EXPECT_EQ(ui.user_filter, "") << "an empty filter is everyone";
  press("f" + std::string(100, 'a') + "\r");
  EXPECT_EQ(ui.user_filter.size(), 64u);
}

}  // namespace
}  // namespace gpulane
