// os/user_file.h, the one way the root side opens a user's path: symlinks (final, and /proc's
// magic links), FIFOs and devices are refused without blocking, reads are bounded, and a root
// process opens with the user's rights (those tests need root and skip otherwise).
#include "os/user_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gpulane::os {
namespace {

namespace fs = std::filesystem;

class UserFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpulane-user-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(UserFileTest, AFinalSymlinkIsRefusedNotFollowed) {
  std::ofstream(dir_ / "target") << "secret\n";
  fs::create_symlink(dir_ / "target", dir_ / "log");
  auto file = OpenAsUser((dir_ / "log").string(), std::nullopt, {});
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().kind, ErrorKind::kUnsafe) << file.error().message;
  EXPECT_FALSE(ReadTailAsUser((dir_ / "log").string(), std::nullopt, std::nullopt, 4096));
}

TEST_F(UserFileTest, AFifoIsRefusedWithoutBlockingForReadingAppendingAndSizing) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  for (auto access : {UserFileAccess::kRead, UserFileAccess::kAppend, UserFileAccess::kStat}) {
    auto file = OpenAsUser((dir_ / "fifo").string(), std::nullopt, {.access = access});
    ASSERT_FALSE(file);
    EXPECT_EQ(file.error().kind, ErrorKind::kUnsafe) << file.error().message;
  }
}

TEST_F(UserFileTest, DevZeroIsRefusedAndDevNullOnlyWhereAsked) {
  EXPECT_FALSE(ReadTailAsUser("/dev/zero", std::nullopt, std::nullopt, 4096));
  EXPECT_FALSE(OpenAsUser("/dev/null", std::nullopt, {}));
  auto null = OpenAsUser("/dev/null", std::nullopt, {.null_device_ok = true});
  ASSERT_TRUE(null) << null.error().message;
  EXPECT_TRUE(null->null_device());
}

TEST_F(UserFileTest, AProcMagicLinkOnTheWayIsRefused) {
  // /proc/self/fd/N/<name> leads into the folder this process holds open, whoever may reach it.
  const int dir_fd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  std::ofstream(dir_ / "inside") << "x";
  auto file = OpenAsUser(fmt::format("/proc/self/fd/{}/inside", dir_fd), std::nullopt, {});
  close(dir_fd);
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().kind, ErrorKind::kUnsafe) << file.error().message;
}

TEST_F(UserFileTest, TheTailIsBoundedAndAnAppendReachesTheFile) {
  std::ofstream(dir_ / "log") << std::string(10000, 'a') << "end\n";
  auto tail = ReadTailAsUser((dir_ / "log").string(), std::nullopt, std::nullopt, 8);
  ASSERT_TRUE(tail) << tail.error().message;
  EXPECT_EQ(*tail, "aaaaend\n");
  ASSERT_TRUE(AppendAsUser((dir_ / "log").string(), std::nullopt, std::nullopt, "more\n").ok());
  EXPECT_EQ(*ReadTailAsUser((dir_ / "log").string(), std::nullopt, std::nullopt, 9), "end\nmore\n");
  EXPECT_FALSE(AppendAsUser((dir_ / "missing").string(), std::nullopt, std::nullopt, "x").ok()) << "never created";
}

TEST_F(UserFileTest, RootOpensWithTheUsersRightsAndGetsItsOwnBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  std::ofstream(dir_ / "roots") << "secret\n";
  fs::permissions(dir_ / "roots", fs::perms::owner_read | fs::perms::owner_write);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  const FileUser nobody{65534, 65534};
  auto as_nobody = OpenAsUser((dir_ / "roots").string(), nobody, {});
  ASSERT_FALSE(as_nobody);
  EXPECT_EQ(as_nobody.error().kind, ErrorKind::kPermission) << as_nobody.error().message;
  EXPECT_FALSE(AccessibleAsUser((dir_ / "roots").string(), nobody, R_OK));
  // Root's rights are back after the call: root reads it.
  auto as_root = ReadTailAsUser((dir_ / "roots").string(), std::nullopt, std::nullopt, 100);
  ASSERT_TRUE(as_root) << as_root.error().message;
  EXPECT_EQ(*as_root, "secret\n");
  // A file of the user's, but the owner asked for is another: refused.
  ASSERT_EQ(chown((dir_ / "roots").c_str(), 65534, 65534), 0);
  fs::permissions(dir_ / "roots", fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  EXPECT_TRUE(OpenAsUser((dir_ / "roots").string(), nobody, {.owner = 65534u}));
  EXPECT_FALSE(OpenAsUser((dir_ / "roots").string(), nobody, {.owner = 1234u}));
}

}  // namespace
}  // namespace gpulane::os
