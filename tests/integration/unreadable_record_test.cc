// A record that cannot be read is never absent (issue 23, item 2), through the real binary:
//  - no command line makes a lease unreadable (a lease keeps at most 4 KiB of it; tested at 1 MiB
//    of argv, the repro's 70 KB included);
//  - a live lease or ticket file (its lock held) that is too large, not JSON, missing fields or not
//    a regular file holds the GPUs it names, or every GPU when it names none, until its lock is gone,
//    and `status` says so.
// Before: such a file was skipped by every reader, so its GPU was handed out again while `status`
// showed it free.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>

#include "integration/run_support.h"
#include "support/planted.h"

namespace gpulane::test {
namespace {

constexpr std::uint32_t kUnreadableNobody = 65534;

// Another user's (nobody's) file as root; the test's own otherwise.
std::optional<std::uint32_t> UnreadableAttacker() { return geteuid() == 0 ? std::optional(kUnreadableNobody) : std::nullopt; }

std::string Uuid(const json& state, unsigned i) { return state["devices"][i]["uuid"].get<std::string>(); }

RunResult Status(const FakeMachine& machine) { return RunGpulane({"status", "--color", "never"}, RunEnv(machine)); }

// The status line of GPU `i` ("  0 NVIDIA H200 | ...").
std::string UnreadableStatusLine(const RunResult& status, unsigned i) {
  for (const std::string& line : Lines(status.out))
    if (line.rfind(fmt::format("[{}] ", i), 0) == 0) return line;  // status: "[0] NVIDIA H200 | ..."
  return "";
}

// The repro of item 2 with 1 MiB of arguments: nine of 116 KiB each (one argument may hold at most
// 128 KiB, MAX_ARG_STRLEN). Before: the 64 KiB-bounded readers skipped the lease, and a second
// `run --gpus 0 --no-wait` got GPU0 too.
TEST(UnreadableRecords, AMegabyteCommandLineDoesNotMakeTheLeaseUnreadable) {
  FakeMachine machine(IdleMachine(2));
  const Gate gate(machine.dir() / "gate");
  const fs::path log = machine.dir() / "jobs.log";
  std::vector<std::string> args = {"--gpus", "0", "--"};
  for (const auto& a : HeldJob("long", log.string(), gate)) args.push_back(a);
  std::size_t argv_bytes = 0;
  for (int k = 0; k < 9; ++k) {
    args.push_back(std::string(116 * 1024, static_cast<char>('A' + k)));
    argv_bytes += args.back().size();
  }
  ASSERT_GE(argv_bytes, 1u << 20);
  Child holder = StartRun(machine, args);
  ASSERT_TRUE(Eventually([&] { return CountEvents(log, "start") == 1; }, 30)) << holder.ErrSoFar();

  const std::vector<json> leases = LeaseDirRecords(machine, ".lease");
  ASSERT_EQ(leases.size(), 1u) << "the lease reads as JSON";
  EXPECT_FALSE(leases[0].contains("command")) << "a lease keeps no command line (docs/security.md, \"Privacy\")";
  EXPECT_LE(leases[0]["label"].get<std::string>().size(), 128u) << "its label is bounded";

  RunResult second = RunOn(machine, {"--gpus", "0", "--no-wait", "--", "true"});
  EXPECT_TRUE(IsError(second, 5, "GPU0: leased by")) << "GPU0 was given to a second job";
  EXPECT_TRUE(Contains(UnreadableStatusLine(Status(machine), 0), fmt::format("[job r{} (", holder.pid())))
      << Status(machine).out;
  gate.Open();
  auto done = holder.Wait(60);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->exit_code, 0) << done->err;
}

// A live lease that is not JSON (cut short) holds the GPU it names, and only that one, until its
// lock is gone.
TEST(UnreadableRecords, ATruncatedLockedLeaseHoldsTheGpuItNamesUntilItsLockIsGone) {
  const json state = IdleMachine(2);
  FakeMachine machine(state);
  const std::string text = fmt::format(R"({{"job_id":"r1","gpus":[{{"uuid":"{}"}}],"pid":1,"started_)", Uuid(state, 1));
  {
    PlantedFile cut(machine.dir() / "leases" / "r1.cut00000.lease", text, PlantedFile::Holder::kTest, UnreadableAttacker());
    RunResult both = RunOn(machine, {"-g", "2", "--no-wait", "--", "true"});
    EXPECT_TRUE(IsError(both, 5, "GPU1: leased by")) << "GPU1 was handed out under a live lease";
    EXPECT_TRUE(Contains(both.err, "an unreadable lease: not JSON")) << both.err;
    RunResult one = RunOn(machine, {"--no-wait", "--", "printenv", "CUDA_VISIBLE_DEVICES"});
    EXPECT_EQ(one.exit_code, 0) << one.err;
    EXPECT_EQ(one.out, "0\n") << "what the file does not name stays free";
    const RunResult status = Status(machine);
    EXPECT_TRUE(Contains(UnreadableStatusLine(status, 1), "held by an unreadable lease")) << status.out;
    EXPECT_FALSE(Contains(UnreadableStatusLine(status, 0), "unreadable")) << status.out;
  }
  RunResult after = RunOn(machine, {"-g", "2", "--no-wait", "--", "true"});
  EXPECT_EQ(after.exit_code, 0) << "its lock is gone, and with it the hold: " << after.err;
}

// A live lease larger than readers read (1 MiB) names what it names past that bound unknown: it
// holds every GPU.
TEST(UnreadableRecords, AnOversizedLockedLeaseHoldsEveryGpu) {
  const json state = IdleMachine(2);
  FakeMachine machine(state);
  const std::string text = fmt::format(R"({{"command":"{}","gpus":[{{"uuid":"{}"}}],"job_id":"r2","pid":1}})",
                                       std::string(2 << 20, 'x'), Uuid(state, 1));
  PlantedFile big(machine.dir() / "leases" / "r2.big00000.lease", text, PlantedFile::Holder::kTest, UnreadableAttacker());
  RunResult any = RunOn(machine, {"--no-wait", "--", "true"});
  EXPECT_TRUE(IsError(any, 5, "an unreadable lease: larger than 1 MiB")) << "a GPU was handed out under a live lease";
  const RunResult status = Status(machine);
  EXPECT_TRUE(Contains(UnreadableStatusLine(status, 0), "held by an unreadable lease")) << status.out;
  EXPECT_TRUE(Contains(UnreadableStatusLine(status, 1), "held by an unreadable lease")) << status.out;
}

// A live lease of the wrong type (a directory whose lock someone holds) holds every GPU.
TEST(UnreadableRecords, ALockedDirectoryNamedAsALeaseHoldsEveryGpu) {
  FakeMachine machine(IdleMachine(1));
  const fs::path dir = machine.dir() / "leases" / "r3.dir00000.lease";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  RunResult held = RunOn(machine, {"--no-wait", "--", "true"});
  EXPECT_TRUE(IsError(held, 5, "an unreadable lease: not a regular file"));
  close(fd);
  RunResult free = RunOn(machine, {"--no-wait", "--", "true"});
  EXPECT_EQ(free.exit_code, 0) << free.err;
  rmdir(dir.c_str());
}

// A live ticket that does not parse stands in line (at its file's time) for the GPU it names.
// Before: it was skipped, so a request behind it took that GPU.
TEST(UnreadableRecords, AnUnparsableLockedTicketStandsInLineForTheGpuItNames) {
  const json state = IdleMachine(2);
  FakeMachine machine(state);
  const std::string text = fmt::format(R"({{"id":"w1","seq":"soon","request":{{"allowed_uuids":["{}"]}}}})", Uuid(state, 0));
  PlantedFile ticket(machine.dir() / "leases" / "w00000000000000000001.bad00000.wait", text, PlantedFile::Holder::kTest,
                     UnreadableAttacker());
  RunResult gpu0 = RunOn(machine, {"--gpus", "0", "--no-wait", "--", "true"});
  EXPECT_TRUE(IsError(gpu0, 5, "GPU0: ")) << "GPU0 was taken from the request ahead of it";
  RunResult gpu1 = RunOn(machine, {"--gpus", "1", "--no-wait", "--", "true"});
  EXPECT_EQ(gpu1.exit_code, 0) << gpu1.err;
}

}  // namespace
}  // namespace gpulane::test
