// The lease directory (lease/lease_dir.h) in a temporary folder: what it accepts as a directory,
// live and stale files, the line's order, and what it ignores.
#include "lease/lease_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
    auto dir = LeaseDir::Open((root_ / name).string());
    EXPECT_TRUE(dir.ok()) << dir.error().message;
    return std::move(dir).value();
  }
  fs::path root_;
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
  auto link = LeaseDir::Open((root_ / "link").string());
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.error().kind, ErrorKind::kUnsafe);
  fs::create_directory(root_ / "open");
  chmod((root_ / "open").c_str(), 0777);
  auto open = LeaseDir::Open((root_ / "open").string());
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

TEST_F(LeaseDirTest, AnUnlockedFileIsStaleIgnoredAndRemoved) {
  LeaseDir dir = Open();
  const fs::path stale = root_ / "leases" / "r9.deadbeef.lease";
  std::ofstream(stale) << R"({"job_id":"r9","pid":1,"gpus":[{"uuid":"GPU-a"}]})";
  EXPECT_TRUE(dir.Read().leases.empty()) << "nobody holds its lock: its job is gone";
  EXPECT_FALSE(fs::exists(stale)) << "its owner (or root) removes it";
}

TEST_F(LeaseDirTest, DamagedOrForeignFilesAreNoLeases) {
  LeaseDir dir = Open();
  const fs::path damaged = root_ / "leases" / "r8.00000000.lease";
  std::ofstream(damaged) << "{not json";
  int fd = open(damaged.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_SH), 0);  // held, so not stale: still not a lease
  EXPECT_TRUE(dir.Read().leases.empty());
  close(fd);
}

TEST_F(LeaseDirTest, TheLineIsByPriorityThenArrival) {
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

TEST_F(LeaseDirTest, AQueuedJobKeepsItsSubmissionTimeAsItsPlace) {
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

}  // namespace
}  // namespace gpulane::lease
