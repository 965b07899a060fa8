// The daemon's GPUs and stores come from what it is given (issue 25, item 3: os::Env's GPUs and
// daemon::DaemonParts' store factory), never from NVML or a store path of its own: so a test's
// GPUs are the ones its clients see, and its GPU history is written to the store its parts opened.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "store/history_store.h"
#include "support/inproc_daemon.h"

namespace gpulane::test {
namespace {

using nlohmann::json;

class DaemonInProcParts : public InProcDaemonTest {};

// The GPUs a client's snapshot shows are those of the Env's GPU source (one backend, for the loop:
// telemetry is off), not NVML's.
TEST_F(DaemonInProcParts, ClientsSeeTheGpusOfTheEnvItWasGiven) {
  gpu_count_ = 3;
  StartDaemon();
  json reply = Call(Root(), {{"op", "snapshot"}});
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  const GpuSnapshot given = IdleSnapshot(3);
  ASSERT_EQ(reply["snapshot"]["devices"].size(), 3u) << reply.dump();
  for (unsigned i = 0; i < 3; ++i) EXPECT_EQ(reply["snapshot"]["devices"][i]["uuid"], given.devices[i].uuid);
  EXPECT_EQ(gpus_.opens(), 1);
}

// With telemetry on, the sampler reads a backend of its own from the same Env and stores its GPU
// history in the store the parts open for <state>/history.db: here a file elsewhere, which is
// where the history then is (and none in the state folder).
TEST_F(DaemonInProcParts, TheSamplersHistoryGoesToTheStoreItsPartsOpen) {
  config_.telemetry_enabled = true;
  const std::string elsewhere = (dir_ / "elsewhere.db").string();
  std::vector<std::string> asked;
  open_history_ = [&](const std::string& path) {
    asked.push_back(path);
    return store::HistoryStore::Open(elsewhere);
  };
  StartDaemon();
  ASSERT_EQ(asked, std::vector<std::string>{paths_.state_dir + "/history.db"});
  EXPECT_EQ(gpus_.opens(), 2) << "the loop's backend and the sampler's, both from the Env";
  // The sampler's first sample is taken as its thread starts: GPU 0's history answers once it is in.
  json history;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do history = Call(Root(), {{"op", "history"}, {"gpu", 0}});
  while (!history.value("ok", false) && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(history.value("ok", false)) << history.dump();
  daemon_.reset();  // the sampler's partly filled buckets are stored as it stops
  auto store = store::HistoryStore::Open(elsewhere);
  ASSERT_TRUE(store) << store.error().message;
  auto rows = (*store)->Rows(IdleSnapshot(2).devices[0].uuid, 10, 0, 1e12);
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_FALSE(rows->empty()) << "no GPU history in the store the daemon's parts opened";
  EXPECT_FALSE(std::filesystem::exists(paths_.state_dir + "/history.db")) << "the daemon opened a history store of its own";
}

// A history store that cannot be opened leaves the daemon serving, its log saying why nothing is kept.
TEST_F(DaemonInProcParts, AHistoryStoreThatCannotBeOpenedLeavesTheDaemonServing) {
  config_.telemetry_enabled = true;
  open_history_ = [](const std::string&) -> Result<std::unique_ptr<store::HistoryStore>> {
    return MakeError(ErrorKind::kIo, "history.db: disk unplugged in this test");
  };
  CaptureLog();
  StartDaemon();
  EXPECT_NE(Logged().find("history.db: disk unplugged in this test: GPU history and usage records are not stored"),
            std::string::npos);
  const std::int64_t job = SubmitOne();
  EXPECT_GT(job, 0);
  EXPECT_EQ(Launched(), std::vector<std::int64_t>{job});
}

}  // namespace
}  // namespace gpulane::test
