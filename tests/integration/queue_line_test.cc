// `gpulane queue` lists the `gpulane run`s waiting in the GPUs' line below the daemon's jobs: a new
// user saw her waiting run nowhere but in `status`'s reservations, and the queue looked empty.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

TEST(QueueLine, AWaitingRunIsListedWithItsPlaceInLineAndLeavesWhenItStarts) {
  TestDaemon d;
  const fs::path gate = d.dir() / "gate";
  Child holder = d.StartGpulane({"run", "-g", "2", "--", "sh", "-c", "while [ ! -e " + gate.string() + " ]; do sleep 0.02; done"});
  ASSERT_TRUE(Eventually([&] { return d.Gpulane({"pick", "-g", "1"}).exit_code == 5; }, 20)) << holder.ErrSoFar();
  Child waiting = d.StartGpulane({"run", "-g", "1", "--", "echo", "started"});
  const std::string id = "r" + std::to_string(waiting.pid());
  std::string table;
  ASSERT_TRUE(Eventually([&] { return Contains(table = d.Gpulane({"queue"}).out, id); }, 20)) << table << waiting.ErrSoFar();
  std::string row;
  for (const std::string& line : Lines(table))
    if (Contains(line, id)) row = line;
  EXPECT_TRUE(Contains(row, "echo")) << row;
  EXPECT_TRUE(Contains(row, "waiting")) << row;
  EXPECT_TRUE(Contains(row, "gpulane run, 1st in line")) << row;
  EXPECT_FALSE(Contains(d.Gpulane({"queue", "-u", "nobody"}).out, id)) << "-u filters them too";
  // queue --json lists it too, after the jobs, with its place in line (a new user's finding: it
  // listed the queued jobs alone).
  const nlohmann::json listed = d.Queue();
  nlohmann::json object;
  for (const nlohmann::json& o : listed)
    if (o.value("id_text", "") == id) object = o;
  ASSERT_TRUE(object.is_object()) << listed.dump(2);
  EXPECT_EQ(object["state"], "waiting");
  EXPECT_FALSE(object.contains("id")) << "no queued job's numeric id";
  EXPECT_EQ(object["line"], nlohmann::json({{"kind", "gpulane run"}, {"place", 1}, {"inside_job", false}}));
  EXPECT_EQ(object["spec"]["name"], "echo");
  EXPECT_EQ(object["spec"]["request"]["count"], 1);
  Touch(gate);
  auto done = waiting.Wait(30);
  ASSERT_TRUE(done) << waiting.ErrSoFar();
  EXPECT_EQ(done->exit_code, 0) << done->err;
  EXPECT_FALSE(Contains(d.Gpulane({"queue"}).out, id)) << "started and ended: no longer waiting";
  ASSERT_TRUE(holder.Wait(20));
  EXPECT_EQ(d.Queue(), nlohmann::json::array()) << "nor in queue --json";
}

// A new user's trial: while `gpulane run -- sleep 20` held GPU0, `queue` showed an empty table
// though `status` named the run's job. A run that holds GPUs is listed as running (table and
// --json) until it ends.
TEST(QueueLine, ARunningRunIsListedAsRunningUntilItEnds) {
  TestDaemon d;
  const fs::path gate = d.dir() / "gate";
  Child run = d.StartGpulane({"run", "-g", "2", "--", "sh", "-c", "while [ ! -e " + gate.string() + " ]; do sleep 0.02; done"});
  const std::string id = "r" + std::to_string(run.pid());
  std::string table;
  ASSERT_TRUE(Eventually([&] { return Contains(table = d.Gpulane({"queue"}).out, id); }, 20)) << table << run.ErrSoFar();
  std::string row;
  for (const std::string& line : Lines(table))
    if (Contains(line, id)) row = line;
  EXPECT_TRUE(Contains(row, " sh ")) << row;
  EXPECT_TRUE(Contains(row, " 2 ")) << "its GPUs: " << row;
  EXPECT_TRUE(Contains(row, "running")) << row;
  EXPECT_TRUE(Contains(row, "gpulane run")) << row;
  EXPECT_FALSE(Contains(d.Gpulane({"queue", "-u", "nobody"}).out, id)) << "-u filters them too";
  nlohmann::json object;
  for (const nlohmann::json& o : d.Queue())
    if (o.value("id_text", "") == id) object = o;
  ASSERT_TRUE(object.is_object()) << d.Queue().dump(2);
  EXPECT_EQ(object["state"], "running");
  EXPECT_FALSE(object.contains("id")) << "no queued job's numeric id";
  EXPECT_EQ(object["run"], nlohmann::json({{"kind", "gpulane run"}, {"inside_job", false}}));
  EXPECT_EQ(object["gpu_uuids"].size(), 2u);
  EXPECT_EQ(object["spec"]["request"]["count"], 2);
  Touch(gate);
  ASSERT_TRUE(run.Wait(20)) << run.ErrSoFar();
  EXPECT_FALSE(Contains(d.Gpulane({"queue"}).out, id)) << "ended: no longer listed";
}

}  // namespace
}  // namespace gpulane::test
