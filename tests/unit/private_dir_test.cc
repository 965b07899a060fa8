// The user's private folder in the shared /tmp (daemon/paths.h: EnsurePrivateDir, SecureUserPaths):
// made mode 0700 whatever the umask, and refused when it is a symlink, not a folder, another
// user's, or open to others (issue 9, item 10).
#include "daemon/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpulane::daemon {
namespace {

namespace fs = std::filesystem;

class PrivateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpulane-privdir-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

TEST_F(PrivateDirTest, AMissingFolderIsMadeMode0700WhateverTheUmask) {
  const mode_t old = umask(0);
  Status made = EnsurePrivateDir((root_ / "mine").string(), /*create=*/true);
  umask(old);
  ASSERT_TRUE(made.ok()) << made.error().message;
  EXPECT_EQ(ModeOf(root_ / "mine"), 0700u);
  EXPECT_TRUE(EnsurePrivateDir((root_ / "mine").string(), true).ok()) << "and taken as it is the next time";
  EXPECT_TRUE(EnsurePrivateDir((root_ / "absent").string(), /*create=*/false).ok()) << "nothing there: nothing to distrust";
  EXPECT_FALSE(fs::exists(root_ / "absent"));
}

TEST_F(PrivateDirTest, ASymlinkAFileOrAnOpenModeIsRefusedNamingTheFix) {
  fs::create_directory(root_ / "real");
  chmod((root_ / "real").c_str(), 0700);
  fs::create_directory_symlink(root_ / "real", root_ / "link");
  Status s = EnsurePrivateDir((root_ / "link").string(), true);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kUnsafe);
  EXPECT_NE(s.error().message.find("is a symbolic link"), std::string::npos) << s.error().message;

  std::ofstream(root_ / "file") << "x";
  s = EnsurePrivateDir((root_ / "file").string(), true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("is not a directory"), std::string::npos) << s.error().message;

  fs::create_directory(root_ / "open");
  chmod((root_ / "open").c_str(), 0755);
  s = EnsurePrivateDir((root_ / "open").string(), true);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, (root_ / "open").string() + " has mode 0755, not 0700: others could reach gpulane's "
                                                           "socket and state in it; fix with chmod 700 " +
                                   (root_ / "open").string());
}

TEST_F(PrivateDirTest, AnotherUsersFolderIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: a folder of another user";
  fs::create_directory(root_ / "theirs");
  chmod((root_ / "theirs").c_str(), 0700);
  ASSERT_EQ(chown((root_ / "theirs").c_str(), 65534, 65534), 0);
  Status s = EnsurePrivateDir((root_ / "theirs").string(), true);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kUnsafe);
  EXPECT_NE(s.error().message.find("belongs to"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("XDG_RUNTIME_DIR"), std::string::npos) << "names a way out";
}

TEST(SecureUserPaths, OnlyPathsInTheSharedTmpFolderAreChecked) {
  EXPECT_TRUE(SecureUserPaths({"/run/user/1000/gpulane/gpulane.sock", "/home/a/.local/state/gpulane", false}, false).ok());
  // /tmp/gpulane-<uid>x is another folder, not inside the user's own.
  EXPECT_TRUE(SecureUserPaths({UserTmpDir() + "x/gpulane.sock", "/home/a/.local/state/gpulane", false}, false).ok());
}

}  // namespace
}  // namespace gpulane::daemon
