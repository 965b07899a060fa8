// The real os::FileSystem's calls for the job files (os/file_system.h), on a temporary folder:
// what JobFiles relies on when the daemon and a supervisor hand a job over on disk.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "os/file_system.h"

namespace gpulane::os {
namespace {

namespace fs = std::filesystem;

class SystemFileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("system-file-system-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string PathIn(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
  SystemFileSystem files_;
};

TEST_F(SystemFileSystemTest, WriteAtomicallyReplacesTheFileWithItsMode) {
  const std::string path = PathIn("7.status.json");
  ASSERT_TRUE(files_.WriteFileAtomically(path, "old", 0644).ok());
  ASSERT_TRUE(files_.WriteFileAtomically(path, "new", 0644).ok());
  EXPECT_EQ(files_.ReadFile(path).value(), "new");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_FALSE(fs::exists(path + ".tmp")) << "renamed into place";
}

TEST_F(SystemFileSystemTest, ReadFileNeverFollowsASymlink) {
  ASSERT_TRUE(files_.WriteFileAtomically(PathIn("real"), "text", 0600).ok());
  fs::create_symlink(PathIn("real"), PathIn("link"));
  EXPECT_FALSE(files_.ReadFile(PathIn("link")));
  EXPECT_EQ(files_.ReadFile(PathIn("real")).value(), "text");
}

TEST_F(SystemFileSystemTest, RemoveFileAndListDir) {
  ASSERT_TRUE(files_.WriteFileAtomically(PathIn("7.spec.json"), "{}", 0600).ok());
  ASSERT_TRUE(files_.WriteFileAtomically(PathIn("12.lock"), "", 0600).ok());
  auto names = files_.ListDir(dir_.string());
  ASSERT_TRUE(names) << names.error().message;
  std::sort(names->begin(), names->end());
  EXPECT_EQ(*names, (std::vector<std::string>{"12.lock", "7.spec.json"})) << "without . and ..";
  EXPECT_TRUE(files_.RemoveFile(PathIn("7.spec.json")).ok());
  EXPECT_FALSE(fs::exists(PathIn("7.spec.json")));
  EXPECT_TRUE(files_.RemoveFile(PathIn("7.spec.json")).ok()) << "nothing there is no error";
  EXPECT_EQ(files_.ListDir(PathIn("missing")).error().kind, ErrorKind::kIo);
}

TEST_F(SystemFileSystemTest, LockedExclusivelyWhileAnotherDescriptorHoldsTheLock) {
  const std::string lock = PathIn("7.lock");
  EXPECT_FALSE(files_.LockedExclusively(lock)) << "no file, no lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(files_.LockedExclusively(lock)) << "a lock file nobody holds";
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_TRUE(files_.LockedExclusively(lock));
  close(fd);
  EXPECT_FALSE(files_.LockedExclusively(lock)) << "let go with its descriptor";
}

}  // namespace
}  // namespace gpulane::os
