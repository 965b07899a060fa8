// Whether a system daemon is installed (daemon/paths.h: SystemDaemonInstalled), from what an admin's
// install leaves behind under a test root, and the daemon.mode config key.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "daemon/paths.h"
#include "util/config.h"

namespace gpulane {
namespace {

namespace fs = std::filesystem;

// A fresh folder standing in for "/", and GPULANE_SYSTEM_DAEMON unset for the test.
class SystemDaemonInstalledTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpulane-discovery-XXXXXX";
    root_ = mkdtemp(tmpl);
    if (const char* v = std::getenv("GPULANE_SYSTEM_DAEMON")) saved_ = v;
    unsetenv("GPULANE_SYSTEM_DAEMON");
  }
  void TearDown() override {
    fs::remove_all(root_);
    if (saved_) setenv("GPULANE_SYSTEM_DAEMON", saved_->c_str(), 1);
    else unsetenv("GPULANE_SYSTEM_DAEMON");
  }
  bool Installed(const std::string& mode = "auto") {
    auto r = daemon::SystemDaemonInstalled(mode, root_.string());
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() && *r;
  }
  fs::path root_;
  std::optional<std::string> saved_;
};

TEST_F(SystemDaemonInstalledTest, AFreshMachineHasNone) { EXPECT_FALSE(Installed()); }

TEST_F(SystemDaemonInstalledTest, TheSystemStateFolderMeansOneIsInstalled) {
  fs::create_directories(root_ / "var/lib/gpulane");
  EXPECT_TRUE(Installed());
}

TEST_F(SystemDaemonInstalledTest, TheEnabledUnitMeansOneIsInstalled) {
  fs::create_directories(root_ / "usr/local/lib/systemd/system");
  std::ofstream(root_ / "usr/local/lib/systemd/system/gpulane.service") << "[Unit]\n";
  EXPECT_FALSE(Installed()) << "a unit file that is not enabled (cmake --install alone) is not a daemon";
  fs::create_directories(root_ / "etc/systemd/system/multi-user.target.wants");
  fs::create_symlink(root_ / "usr/local/lib/systemd/system/gpulane.service",
                     root_ / "etc/systemd/system/multi-user.target.wants/gpulane.service");
  EXPECT_TRUE(Installed());
  fs::remove(root_ / "usr/local/lib/systemd/system/gpulane.service");
  EXPECT_FALSE(Installed()) << "a link to a removed unit is no daemon";
}

TEST_F(SystemDaemonInstalledTest, AUnitFileInAnyOfSystemdsFoldersIsAUnitSystemctlCanStart) {
  EXPECT_FALSE(daemon::SystemUnitInstalled(root_.string()));
  for (const char* dir : {"etc/systemd/system", "usr/local/lib/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"}) {
    fs::create_directories(root_ / dir);
    std::ofstream(root_ / dir / "gpulane.service") << "[Unit]\n";
    EXPECT_TRUE(daemon::SystemUnitInstalled(root_.string())) << dir;
    fs::remove(root_ / dir / "gpulane.service");
    EXPECT_FALSE(daemon::SystemUnitInstalled(root_.string())) << dir;
  }
}

TEST_F(SystemDaemonInstalledTest, TheConfigModeDecidesOverTheMarks) {
  EXPECT_TRUE(Installed("system"));
  fs::create_directories(root_ / "var/lib/gpulane");
  EXPECT_FALSE(Installed("user"));
}

TEST_F(SystemDaemonInstalledTest, TheEnvironmentDecidesOverEverything) {
  fs::create_directories(root_ / "var/lib/gpulane");
  setenv("GPULANE_SYSTEM_DAEMON", "0", 1);
  EXPECT_FALSE(Installed("system"));
  setenv("GPULANE_SYSTEM_DAEMON", "1", 1);
  fs::remove_all(root_ / "var");
  EXPECT_TRUE(Installed("user"));
  setenv("GPULANE_SYSTEM_DAEMON", "yes", 1);
  auto r = daemon::SystemDaemonInstalled("auto", root_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(r.error().message.find("GPULANE_SYSTEM_DAEMON='yes'"), std::string::npos) << r.error().message;
}

TEST(DaemonModeConfig, AcceptsTheThreeModesOnlyFromTheMachinesFile) {
  char tmpl[] = "/tmp/gpulane-config-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string file = (dir / "config.toml").string();
  for (const char* mode : {"auto", "system", "user"}) {
    std::ofstream(file) << "[daemon]\nmode = \"" << mode << "\"\n";
    Config config;
    Status s = LoadConfigFile(file, true, config);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(config.daemon_mode, mode);
  }
  Config config;
  EXPECT_FALSE(LoadConfigFile(file, false, config).ok()) << "a user's own file may not set it";
  std::ofstream(file) << "[daemon]\nmode = \"maybe\"\n";
  Status bad = LoadConfigFile(file, true, config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("daemon.mode must be"), std::string::npos) << bad.error().message;
  EXPECT_EQ(Config{}.daemon_mode, "auto");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulane
