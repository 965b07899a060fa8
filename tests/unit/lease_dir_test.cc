// The lease directory (lease/lease_dir.h) in a temporary folder: what it accepts as a directory,
// live and stale files, the line's order, and what it ignores.
#include "lease/lease_dir.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <fmt/format.h>

#include "lease/line_shares.h"
#include "support/planted.h"

namespace gpulane::lease {
namespace {

namespace fs = std::filesystem;

class LeaseDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpulane-leasedir-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(root_); }
  LeaseDir Open(const std::string& name = "leases") {
    auto dir = LeaseDir::Open((root_ / name).string(), clock_);
    EXPECT_TRUE(dir.ok()) << dir.error().message;
    return std::move(dir).value();
  }
  fs::path root_;
  const SystemClock clock_;
};

LeaseRecord Record(const std::string& job) {
  LeaseRecord r;
  r.job_id = job;
  r.pid = getpid();
  r.gpus = {{"GPU-a", std::nullopt}};
  return r;
}

TicketRecord Ticket(int priority, std::uint64_t seq = 0) {
  TicketRecord t;
  t.pid = getpid();
  t.seq = seq;
  t.request.priority = priority;
  return t;
}

TEST_F(LeaseDirTest, CreatesAMissingDirectorySticky) {
  LeaseDir dir = Open();
  struct stat st {};
  ASSERT_EQ(lstat((root_ / "leases").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777);
}

TEST_F(LeaseDirTest, RefusesASymlinkAndAWorldWritableDirectoryWithoutStickyBit) {
  fs::create_directory(root_ / "real");
  fs::create_directory_symlink(root_ / "real", root_ / "link");
  auto link = LeaseDir::Open((root_ / "link").string(), clock_);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.error().kind, ErrorKind::kUnsafe);
  fs::create_directory(root_ / "open");
  chmod((root_ / "open").c_str(), 0777);
  auto open = LeaseDir::Open((root_ / "open").string(), clock_);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().kind, ErrorKind::kUnsafe);
  EXPECT_NE(open.error().message.find("chmod 1777"), std::string::npos) << open.error().message;
}

TEST_F(LeaseDirTest, AHeldLeaseIsLiveAndEndsWithItsHolder) {
  LeaseDir dir = Open();
  auto held = dir.CreateLease(Record("r1"));
  ASSERT_TRUE(held.ok());
  DirContents contents = dir.Read();
  ASSERT_EQ(contents.leases.size(), 1u);
  EXPECT_EQ(contents.leases[0].job_id, "r1");
  EXPECT_EQ(contents.leases[0].uid, geteuid()) << "the owner comes from the file, not its content";
  EXPECT_EQ(contents.leases[0].name, held->name());
  held->Release();
  EXPECT_TRUE(dir.Read().leases.empty());
  EXPECT_FALSE(fs::exists(root_ / "leases" / held->name()));
}

// The sampler reads one ending job's lease by name, in the path of the next job's wait: the same
// lease Read finds, while its holder holds it; nothing once released, stale, damaged, or for a name
// that is no plain lease file of the folder.
TEST_F(LeaseDirTest, OneLeaseIsReadByItsNameOnlyWhileHeld) {
  LeaseDir dir = Open();
  auto held = dir.CreateLease(Record("r2"));
  ASSERT_TRUE(held.ok());
  std::optional<LeaseRecord> one = dir.ReadLease(held->name());
  ASSERT_TRUE(one) << held->name();
  EXPECT_EQ(one->job_id, "r2");
  EXPECT_EQ(one->name, held->name());
  EXPECT_EQ(one->uid, geteuid()) << "the owner comes from the file, not its content";
  ASSERT_EQ(one->gpus.size(), 1u);
  EXPECT_EQ(one->gpus[0].uuid, "GPU-a");
  EXPECT_FALSE(dir.ReadLease("../leases/" + held->name())) << "a path, not a name of the folder";
  EXPECT_FALSE(dir.ReadLease("r2.wait"));
  const fs::path damaged = root_ / "leases" / "r8.00000000.lease";
  std::ofstream(damaged) << R"({"gpus":[{"uuid":"GPU-b"}],"job_id":"r8)";
  int fd = open(damaged.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  EXPECT_FALSE(dir.ReadLease("r8.00000000.lease")) << "unreadable: no record to make of it";
  close(fd);
  held->Release();
  EXPECT_FALSE(dir.ReadLease(held->name())) << "released: it ended";
}

// Ctrl-Z at the instant a waiting `gpulane run` holds the directory's lock would stop every
// `gpulane` on the machine with it (seen: a run stopped there kept the one behind it from joining
// the line for good). The stop is held back until the lock is let go, then taken.
TEST_F(LeaseDirTest, CtrlZWhileTheLockIsHeldStopsTheProcessOnlyOnceItHasLetGo) {
  LeaseDir dir = Open();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setpgid(0, 0);  // a group of its own whose parent is in this session: the stop is not discarded
    {
      DirLock lock = dir.Lock();
      kill(getpid(), SIGTSTP);  // what the terminal sends on Ctrl-Z
      const char still = 'r';   // still running, lock held
      if (write(ready[1], &still, 1) != 1) _exit(3);
    }
    _exit(0);  // reached after SIGCONT
  }
  close(ready[1]);
  struct pollfd p {ready[0], POLLIN, 0};
  const bool ran_on = poll(&p, 1, 10000) == 1;  // a stop under the lock never writes
  close(ready[0]);
  if (!ran_on) kill(child, SIGKILL);
  int status = 0;
  if (!ran_on) waitpid(child, &status, 0);
  ASSERT_TRUE(ran_on) << "the process stopped while it held the directory's lock";
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status)) << "the stop was not taken once the lock was let go";
  EXPECT_EQ(WSTOPSIG(status), SIGTSTP);
  const int fd = open((root_ / "leases").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "the stopped process still holds the directory's lock";
  close(fd);
  kill(child, SIGCONT);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A stop signal the caller had blocked before stays blocked after the lock is let go.
TEST_F(LeaseDirTest, TheLockUnblocksOnlyTheStopSignalsItBlocked) {
  LeaseDir dir = Open();
  sigset_t tstp, old, now;
  sigemptyset(&tstp);
  sigaddset(&tstp, SIGTSTP);
  pthread_sigmask(SIG_BLOCK, &tstp, &old);
  { DirLock lock = dir.Lock(); }
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  EXPECT_EQ(sigismember(&now, SIGTSTP), 1);
  EXPECT_EQ(sigismember(&now, SIGTTIN), sigismember(&old, SIGTTIN));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST_F(LeaseDirTest, AnUnlockedFileIsStaleIgnoredAndRemoved) {
  LeaseDir dir = Open();
  const fs::path stale = root_ / "leases" / "r9.deadbeef.lease";
  std::ofstream(stale) << R"({"job_id":"r9","pid":1,"gpus":[{"uuid":"GPU-a"}]})";
  EXPECT_TRUE(dir.Read().leases.empty()) << "nobody holds its lock: its job is gone";
  EXPECT_FALSE(fs::exists(stale)) << "its owner (or root) removes it";
}

// Unknown is not free: a live file that is no lease gpulane can read still holds what it names.
TEST_F(LeaseDirTest, ADamagedLiveFileIsAnUnreadableLeaseHoldingWhatItNames) {
  LeaseDir dir = Open();
  const fs::path damaged = root_ / "leases" / "r8.00000000.lease";
  std::ofstream(damaged) << R"({"gpus":[{"uuid":"GPU-b"}],"job_id":"r8)";
  int fd = open(damaged.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);  // held, so not stale
  DirContents contents = dir.Read();
  ASSERT_EQ(contents.leases.size(), 1u);
  const LeaseRecord& r = contents.leases[0];
  EXPECT_EQ(r.unreadable, "not JSON");
  EXPECT_FALSE(r.every_gpu);
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_EQ(r.gpus[0].uuid, "GPU-b");
  EXPECT_FALSE(r.gpus[0].mem_bytes) << "held exclusively";
  EXPECT_EQ(r.uid, geteuid());
  EXPECT_EQ(r.pid, 0) << "its job owns no process";
  EXPECT_TRUE(HoldsGpu(r, "GPU-b"));
  EXPECT_FALSE(HoldsGpu(r, "GPU-a"));

  std::ofstream(damaged) << "[1, 2, 3]";  // JSON, but no lease: names no GPU, so holds them all
  contents = dir.Read();
  ASSERT_EQ(contents.leases.size(), 1u);
  EXPECT_EQ(contents.leases[0].unreadable, "fields missing or of the wrong type");
  EXPECT_TRUE(contents.leases[0].every_gpu);
  EXPECT_TRUE(HoldsGpu(contents.leases[0], "GPU-a"));
  close(fd);
  EXPECT_TRUE(dir.Read().leases.empty()) << "its lock is gone: stale";
}

TEST(UnreadableRecords, UuidsAreTheGpuAndMigNamesInTheBytesEachOnce) {
  EXPECT_EQ(UuidsNamedIn(R"(x"GPU-1a-2b","MIG-3c/1/0" GPU-1a-2b GPU-)"),
            (std::vector<std::string>{"GPU-1a-2b", "MIG-3c/1/0", "GPU-"}));
  EXPECT_TRUE(UuidsNamedIn("no uuid here").empty());
  const LeaseRecord cut = UnreadableLease("larger than 1 MiB", "GPU-a", /*complete=*/false);
  EXPECT_TRUE(cut.every_gpu) << "what an incomplete file names past what was read is unknown";
  const TicketRecord t = UnreadableTicket("not JSON", R"(["GPU-a","GPU-b","MIG-c"])", true);
  EXPECT_EQ(t.request.count, 2u);
  EXPECT_EQ(t.request.allowed_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
}

TEST(UnreadableRecords, ALeaseKeepsABoundedLabelCutAtACharacter) {
  EXPECT_EQ(LabelForLease("train"), "train");
  std::string long_label = "x";
  for (int i = 0; i < 1000; ++i) long_label += "\xc3\xa9é";  // two-byte characters across the cut
  const std::string kept = LabelForLease(long_label);
  EXPECT_LE(kept.size(), kMaxLeaseLabelBytes);
  ASSERT_EQ(kept.substr(kept.size() - 3), "...");
  const std::string head = kept.substr(0, kept.size() - 3);
  EXPECT_TRUE(head.empty() || (static_cast<unsigned char>(head.back()) & 0xC0) != 0xC0) << "not cut inside a character";
}

TEST(LeasePrivacy, ALeaseLabelIsTheProgramNeverItsArguments) {
  EXPECT_EQ(ProgramLabel({"/usr/bin/python3", "train.py", "--api-key=sk-secret"}), "python3");
  EXPECT_EQ(ProgramLabel({"bash", "-c", "x"}), "bash");
  EXPECT_EQ(ProgramLabel({}), "");
  LeaseRecord r;
  r.job_id = "r1";
  r.label = "python3";
  const nlohmann::json j = ToJson(r);
  EXPECT_FALSE(j.contains("command")) << j.dump();
  EXPECT_EQ(j["label"], "python3");
  LeaseRecord older;  // an older gpulane's lease carries its whole command line: not carried on
  ASSERT_TRUE(FromJson(nlohmann::json::parse(R"({"job_id":"r2","pid":2,"command":"python --api-key=sk-x","gpus":[]})"), &older));
  EXPECT_EQ(older.label, "");
}

TEST_F(LeaseDirTest, TheLineIsByPriorityThenArrival) {
  if (geteuid() != 0) GTEST_SKIP() << "priority above 0 counts only in root's tickets";
  LeaseDir dir = Open();
  TicketRecord first = Ticket(0), urgent = Ticket(5), later = Ticket(0), low = Ticket(-1);
  auto a = dir.CreateTicket(first);
  auto b = dir.CreateTicket(low);
  auto c = dir.CreateTicket(later);
  auto d = dir.CreateTicket(urgent);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_LT(first.seq, later.seq) << "a new ticket's seq is after every live one";
  const auto tickets = dir.Read().tickets;
  ASSERT_EQ(tickets.size(), 4u);
  EXPECT_EQ(tickets[0].id, urgent.id);
  EXPECT_EQ(tickets[1].id, first.id);
  EXPECT_EQ(tickets[2].id, later.id);
  EXPECT_EQ(tickets[3].id, low.id);
}

// A new ticket's place in line is the time on the clock the directory was opened with (os::Env's,
// issue 25 item 3), never one it reads itself: under a clock set to 2033 it is 2033's.
TEST_F(LeaseDirTest, ANewTicketsPlaceIsTheTimeOnTheClockItWasGivenNotTheSystems) {
  const FakeClock in_2033(2'000'000'000.0);
  auto dir = LeaseDir::Open((root_ / "leases").string(), in_2033);
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  TicketRecord t = Ticket(0);
  auto held = dir->CreateTicket(t);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(t.seq, 2'000'000'000'000'000'000ULL);
}

TEST_F(LeaseDirTest, AQueuedJobKeepsItsSubmissionTimeAsItsPlace) {
  if (geteuid() != 0) GTEST_SKIP() << "a seq before its file was made counts only in root's tickets (the system daemon's supervisors)";
  LeaseDir dir = Open();
  TicketRecord now = Ticket(0), submitted_earlier = Ticket(0, 1000);
  auto a = dir.CreateTicket(now);
  auto b = dir.CreateTicket(submitted_earlier);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(dir.Read().tickets.front().id, submitted_earlier.id);
}

TEST_F(LeaseDirTest, ATicketRoundTripsItsRequest) {
  LeaseDir dir = Open();
  TicketRecord t = Ticket(0);
  t.request.count = 2;
  t.request.mem_bytes = 3ULL << 30;
  t.request.allowed_uuids = std::vector<std::string>{"GPU-a", "GPU-b"};
  t.request.order = sched::Order::kPci;
  t.parent = "7.00000000.lease";
  auto held = dir.CreateTicket(t);
  ASSERT_TRUE(held.ok());
  const auto tickets = dir.Read().tickets;
  ASSERT_EQ(tickets.size(), 1u);
  EXPECT_EQ(tickets[0].request.count, 2u);
  EXPECT_EQ(tickets[0].request.mem_bytes, 3ULL << 30);
  EXPECT_EQ(tickets[0].request.allowed_uuids, t.request.allowed_uuids);
  EXPECT_EQ(tickets[0].request.order, sched::Order::kPci);
  EXPECT_EQ(tickets[0].parent, t.parent);
  EXPECT_EQ(tickets[0].request.user, UserNameOf(geteuid()));
}

TEST(FlockHolders, OnlyExclusiveFlocksOfVisibleProcessesAreRead) {
  const auto holders = ParseFlockHolders(
      "1: FLOCK  ADVISORY  WRITE 4121 00:1b:7067 0 EOF\n"
      "1: -> FLOCK  ADVISORY  WRITE 4200 00:1b:7067 0 EOF\n"  // a waiter for the same lock
      "2: POSIX  ADVISORY  WRITE 24358 fe:00:11166394 0 EOF\n"
      "3: OFDLCK ADVISORY  WRITE -1 fe:00:11166395 0 EOF\n"
      "4: FLOCK  ADVISORY  READ 777 fe:00:11166396 0 EOF\n"
      "5: FLOCK  ADVISORY  WRITE 0 fe:00:11166397 0 EOF\n"  // a holder in another PID namespace
      "6: FLOCK  ADVISORY  WRITE 31 103:1a2:12345678901 0 EOF\n"
      "garbage\n");
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders.at(FileKey(makedev(0, 0x1b), 7067)), 4121);
  EXPECT_EQ(holders.at(FileKey(makedev(0x103, 0x1a2), 12345678901ULL)), 31);
}

TEST_F(LeaseDirTest, ALeaseKnowsTheProcessHoldingItsLockAndItsInode) {
  LeaseDir dir = Open();
  auto held = dir.CreateLease(Record("r1"));
  ASSERT_TRUE(held.ok());
  struct stat st {};
  ASSERT_EQ(fstat(held->fd(), &st), 0);
  const auto leases = dir.Read().leases;
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].holder, getpid()) << "from /proc/locks";
  EXPECT_EQ(leases[0].ino, st.st_ino);
  EXPECT_EQ(leases[0].uid, geteuid());
}

FileFacts Facts(std::uint32_t owner, std::uint64_t ctime_ns = 5000) { return {owner, 1, 2, ctime_ns, 0}; }

// Item 8: what a ticket says of its priority, place and user counts only as far as its owner may
// vouch for it.
TEST(TrustTicket, AUsersTicketHasAtMostPriorityZeroAndNoPlaceBeforeItsFileAppeared) {
  TicketRecord t;
  t.seq = 1;
  t.request.priority = 1000;
  ASSERT_TRUE(TrustTicket(t, 1001, Facts(1001)));
  EXPECT_EQ(t.request.priority, 0);
  EXPECT_EQ(t.seq, 5000u + CoarseClockResolutionNs()) << "no earlier than its file's change time, coarse clock lag included";
  EXPECT_EQ(t.request.uid, 1001u);
  EXPECT_EQ(t.dev, 1u);
  EXPECT_EQ(t.ino, 2u);

  TicketRecord lower;
  lower.seq = 2'000'000'000;
  lower.request.priority = -3;
  ASSERT_TRUE(TrustTicket(lower, std::nullopt, Facts(1001)));
  EXPECT_EQ(lower.request.priority, -3) << "a user may lower her own";
  EXPECT_EQ(lower.seq, 2'000'000'000u) << "a place after its file appeared is kept";
  EXPECT_EQ(lower.request.uid, 1001u) << "its owner's, when it names none";

  TicketRecord forged;
  EXPECT_FALSE(TrustTicket(forged, 1002, Facts(1001))) << "naming another user than its owner: no ticket";
}

TEST(TrustTicket, RootsTicketSpeaksForTheUserItNamesWithItsPriorityAndPlace) {
  TicketRecord t;
  t.seq = 1;
  t.request.priority = 7;
  ASSERT_TRUE(TrustTicket(t, 1001, Facts(0)));
  EXPECT_EQ(t.request.priority, 7) << "the system daemon checked the submitter";
  EXPECT_EQ(t.seq, 1u) << "a queued job's submission time";
  EXPECT_EQ(t.request.uid, 1001u);
  TicketRecord own;
  ASSERT_TRUE(TrustTicket(own, std::nullopt, Facts(0)));
  EXPECT_EQ(own.request.uid, 0u);
}

TEST(TrustLease, ALeaseIsItsFilesOwnersAndNamingAnotherUidMakesItNone) {
  LeaseRecord r;
  r.user = "root";
  ASSERT_TRUE(TrustLease(r, std::nullopt, {1001, 3, 4, 0, 42}));
  EXPECT_EQ(r.uid, 1001u);
  EXPECT_EQ(r.holder, 42);
  EXPECT_EQ(r.ino, 4u);
  EXPECT_EQ(r.user, UserNameOf(1001)) << "the name in the file is not taken";
  EXPECT_FALSE(TrustLease(r, 0, {1001, 3, 4, 0, 42}));
}

// The directory as another user leaves it (root only: files of another owner).
class LeaseDirOtherUserTest : public LeaseDirTest {
 protected:
  static constexpr std::uint32_t kNobody = 65534;
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: files of another user";
    LeaseDirTest::SetUp();
  }
};

// Item 8: a copy of a waiter's ticket id in another user's file, first in line by what it says.
TEST_F(LeaseDirOtherUserTest, ACopiedTicketIdIsAnotherTicketKnownApartByItsInode) {
  LeaseDir dir = Open();
  TicketRecord mine = Ticket(0);
  auto held = dir.CreateTicket(mine);
  ASSERT_TRUE(held.ok());
  nlohmann::json forged = ToJson(mine);
  forged["seq"] = 1;
  forged["request"]["priority"] = 1000;
  forged["request"]["uid"] = kNobody;
  test::PlantedFile copy(root_ / "leases" / "w00000000000000000001.forged00.wait", forged.dump(),
                         test::PlantedFile::Holder::kTest, kNobody);
  const auto tickets = dir.Read().tickets;
  ASSERT_EQ(tickets.size(), 2u);
  EXPECT_EQ(tickets[0].id, tickets[1].id) << "two files, one id";
  EXPECT_EQ(tickets[0].ino, mine.ino) << "its own ticket stays first: the copy has priority 0 and a later place";
  EXPECT_EQ(tickets[1].request.priority, 0);
  EXPECT_EQ(tickets[1].request.user, UserNameOf(kNobody));
  EXPECT_NE(tickets[1].ino, mine.ino);
}

TEST_F(LeaseDirOtherUserTest, EntriesNamingAnotherUserThanTheirOwnerAreTheOwnersAndUnreadable) {
  LeaseDir dir = Open();
  nlohmann::json lease = ToJson(Record("r1"));
  lease["uid"] = 0;
  test::PlantedFile l(root_ / "leases" / "r1.forged00.lease", lease.dump(), test::PlantedFile::Holder::kTest, kNobody);
  TicketRecord t = Ticket(0);
  t.id = "w1.forged";
  t.seq = 1;
  t.request.allowed_uuids = std::vector<std::string>{"GPU-a"};
  nlohmann::json ticket = ToJson(t);
  ticket["request"]["uid"] = 0;
  test::PlantedFile w(root_ / "leases" / "w1.forged.wait", ticket.dump(), test::PlantedFile::Holder::kTest, kNobody);
  const DirContents contents = dir.Read();
  ASSERT_EQ(contents.leases.size(), 1u) << "nobody's file saying it is root's lease still holds what it names";
  EXPECT_EQ(contents.leases[0].uid, kNobody) << "as nobody's, not root's";
  EXPECT_EQ(contents.leases[0].unreadable, "names uid 0, not its owner");
  EXPECT_TRUE(HoldsGpu(contents.leases[0], "GPU-a"));
  EXPECT_FALSE(HoldsGpu(contents.leases[0], "GPU-b"));
  ASSERT_EQ(contents.tickets.size(), 1u);
  EXPECT_EQ(contents.tickets[0].request.uid, kNobody);
  EXPECT_EQ(contents.tickets[0].request.priority, 0);
  EXPECT_GT(contents.tickets[0].seq, 1u) << "not before its file appeared";
  EXPECT_FALSE(contents.tickets[0].unreadable.empty());
}

TEST_F(LeaseDirOtherUserTest, AHardLinkCountsOnceAndATicketInAnotherUsersJobIsNone) {
  LeaseDir dir = Open();
  auto lease = dir.CreateLease(Record("7"));
  ASSERT_TRUE(lease.ok());
  ASSERT_EQ(link((root_ / "leases" / lease->name()).c_str(), (root_ / "leases" / "7.linked00.lease").c_str()), 0);
  const DirContents linked = dir.Read();
  ASSERT_EQ(linked.leases.size(), 1u) << "one file under two names";
  EXPECT_TRUE(IsNamed(linked.leases[0], lease->name()));
  EXPECT_TRUE(IsNamed(linked.leases[0], "7.linked00.lease")) << "a nested request finds its job under either";
  TicketRecord t = Ticket(0);
  t.id = "w1.nested";
  t.request.uid = kNobody;
  t.parent = lease->name();  // root's job
  test::PlantedFile w(root_ / "leases" / "w1.nested.wait", ToJson(t).dump(), test::PlantedFile::Holder::kTest, kNobody);
  EXPECT_TRUE(dir.Read().tickets.empty()) << "nobody's ticket in root's job's own line";
  unlink((root_ / "leases" / "7.linked00.lease").c_str());
}

// The system daemon's fair-share factors order the line (lease/line_shares.h): root's ticket for
// a user who used her share stands behind nobody's later one; a copy of the factors that root does
// not vouch for (another owner's file, one others may write, a stale one) orders nothing.
TEST_F(LeaseDirOtherUserTest, PublishedFactorsOrderTheLineOnlyWhenTheDirectorysOwnerVouchesForThem) {
  LeaseDir dir = Open();
  TicketRecord heavy = Ticket(0), light = Ticket(0);
  light.request.uid = kNobody;  // root's ticket speaks for the user it names
  auto a = dir.CreateTicket(heavy);
  auto b = dir.CreateTicket(light);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_LT(heavy.seq, light.seq);
  const double now_s = static_cast<double>(light.seq) / 1e9;
  sched::LineShares shares;
  shares.written_s = now_s;
  shares.factor_of_user = {{UserNameOf(0), 0.1}};  // nobody has no entry: unused, factor 1
  auto first_user = [&] { return dir.Read().tickets.at(0).request.uid; };
  EXPECT_EQ(first_user(), 0u) << "no factors: submission order";

  ASSERT_TRUE(dir.PublishLineShares(shares).ok());
  const DirContents contents = dir.Read();
  ASSERT_TRUE(contents.shares);
  EXPECT_EQ(contents.shares->factor_of_user, shares.factor_of_user);
  EXPECT_EQ(contents.tickets.at(0).request.uid, kNobody) << "the light user's later request goes first";
  struct stat st {};
  ASSERT_EQ(stat((root_ / "leases" / kLineSharesFile).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);

  const fs::path file = root_ / "leases" / kLineSharesFile;
  ASSERT_EQ(chmod(file.c_str(), 0666), 0);
  EXPECT_EQ(first_user(), 0u) << "a file others may write";
  ASSERT_EQ(chmod(file.c_str(), 0644), 0);
  ASSERT_EQ(chown(file.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(first_user(), 0u) << "a file of another owner than the directory's";
  ASSERT_EQ(chown(file.c_str(), 0, 0), 0);
  EXPECT_EQ(first_user(), kNobody);

  shares.written_s = now_s - kLineSharesStaleS - 60;
  ASSERT_TRUE(dir.PublishLineShares(shares).ok());
  EXPECT_EQ(first_user(), 0u) << "factors of a daemon that stopped writing them";
  dir.RemoveLineShares();
  EXPECT_FALSE(fs::exists(file));
}

}  // namespace
}  // namespace gpulane::lease
