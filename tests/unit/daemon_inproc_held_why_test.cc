// A held job's WHY in the queue's table says how to let it go, in-process (tests/support/
// inproc_daemon.h; a new user's "truth on the user's path" finding: `submit --hold` showed none).
#include <gtest/gtest.h>

#include <iterator>
#include <sstream>

#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

// The WHERE / WHY column of job `id`'s row in the queue's table ("" when it has no row).
std::string HeldWhyColumnOf(const std::string& table, std::int64_t id) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    const std::vector<std::string> w{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    if (w.size() > 6 && w[0] == std::to_string(id)) return line.size() > 71 ? line.substr(71) : "";
  }
  return "";
}

class DaemonInProcHeldWhy : public InProcDaemonTest {
 protected:
  std::string Table() { return Call(Root(), {{"op", "queue"}, {"format", "table"}}).value("table", ""); }
};

// `submit --hold` stores no reason: its WHY was empty. Every held job's WHY names the command that
// lets it go, however it was held: at submission, or by `gpulane hold` of a pending job.
TEST_F(DaemonInProcHeldWhy, AHeldJobSaysHowToReleaseIt) {
  gpu_count_ = 1;
  config_.max_waiting_supervisors = 1;
  StartDaemon();
  const std::int64_t at_submit = SubmitOne({.name = "true", .hold = true});
  const std::int64_t blocker = SubmitOne({.name = "true"});
  Running(blocker);
  Turn();
  const std::int64_t waiting = SubmitOne({.name = "true"});  // its supervisor waits: the cap (1) is full
  Waiting(waiting, "in line for GPU0 (#1)");
  Turn();
  const std::int64_t pending = SubmitOne({.name = "true"});
  Turn();
  ASSERT_EQ(State(pending), "pending");
  ASSERT_TRUE(Control(Root(), "hold", {pending}).value("ok", false));
  Turn();
  ASSERT_EQ(State(at_submit), "held");
  ASSERT_EQ(State(pending), "held");
  const std::string table = Table();
  EXPECT_EQ(HeldWhyColumnOf(table, at_submit), "held: gpulane release " + std::to_string(at_submit)) << table;
  EXPECT_EQ(HeldWhyColumnOf(table, pending), "held by root: gpulane release " + std::to_string(pending)) << table;
}

}  // namespace
}  // namespace gpulane::test
