// The daemon's timings (daemon::DaemonSettings) and the GPULANE_DAEMON_* variables that change them.
#include "daemon/settings.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpulane::daemon {
namespace {

// A lookup over `vars` instead of the process environment.
EnvLookup Vars(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(DaemonSettings, DefaultsAreTheDocumentedOnes) {
  auto s = SettingsFromEnvironment(Vars({}));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->requeue_grace_s, 10);
  EXPECT_EQ(s->read_timeout_s, 5);
  EXPECT_EQ(s->tick_s, 1);
  EXPECT_EQ(DaemonSettings{}.requeue_grace_s, 10);
}

TEST(DaemonSettings, EnvironmentVariablesShortenThem) {
  auto s = SettingsFromEnvironment(Vars({{"GPULANE_DAEMON_REQUEUE_GRACE", "500ms"},
                                         {"GPULANE_DAEMON_READ_TIMEOUT", "0.25"},
                                         {"GPULANE_DAEMON_TICK", "20ms"}}));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_DOUBLE_EQ(s->requeue_grace_s, 0.5);
  EXPECT_DOUBLE_EQ(s->read_timeout_s, 0.25);
  EXPECT_DOUBLE_EQ(s->tick_s, 0.02);
}

TEST(DaemonSettings, ValuesOutsideTheirRangeOrUnreadableAreErrors) {
  struct Case {
    const char* name;
    const char* value;
  };
  for (Case c : {Case{"GPULANE_DAEMON_REQUEUE_GRACE", "0"}, Case{"GPULANE_DAEMON_REQUEUE_GRACE", "2h"},
                 Case{"GPULANE_DAEMON_READ_TIMEOUT", "50ms"}, Case{"GPULANE_DAEMON_READ_TIMEOUT", "11m"},
                 Case{"GPULANE_DAEMON_TICK", "1ms"}, Case{"GPULANE_DAEMON_TICK", "11"},
                 Case{"GPULANE_DAEMON_TICK", "soon"}, Case{"GPULANE_DAEMON_TICK", ""}}) {
    auto s = SettingsFromEnvironment(Vars({{c.name, c.value}}));
    ASSERT_FALSE(s) << c.name << "=" << c.value;
    EXPECT_EQ(s.error().kind, ErrorKind::kInvalidArgument);
    EXPECT_NE(s.error().message.find(std::string(c.name) + "=" + c.value + ": give a duration from"), std::string::npos)
        << s.error().message;
  }
  EXPECT_TRUE(SettingsFromEnvironment(Vars({{"GPULANE_DAEMON_REQUEUE_GRACE", "0.1"}, {"GPULANE_DAEMON_TICK", "10s"}})))
      << "the bounds themselves are allowed";
}

}  // namespace
}  // namespace gpulane::daemon
