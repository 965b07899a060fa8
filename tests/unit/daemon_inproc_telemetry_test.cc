// The daemon with telemetry off (telemetry.enabled = false), in-process (tests/support/inproc_daemon.h):
// no sampler, no history database, and the sampler's requests (report, history, usage) answered
// with one `unavailable` line saying telemetry is off. Was
// DaemonTelemetry.WithTelemetryOffReportSaysSoAndNothingIsSampled through the binary; the config
// file's `enabled = false`: TelemetryConfig.EnabledFalseTurnsTheSamplerOff; the CLI's exit 10 for an
// `unavailable` reply: DaemonConnections.OverTheConnectionCapTheCliSaysSoWithExit10. The sampler at
// work (metering, history, reports, idle cancels, the history floor): daemon_inproc_sampler_test.cc;
// what users' commands print of it stays through the binary and the fake NVML
// (tests/integration/daemon_telemetry_test.cc, daemon_anomaly_test.cc).
#include <filesystem>

#include <gtest/gtest.h>

#include "support/inproc_daemon.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DaemonInProcTelemetry : public InProcDaemonTest {};

TEST_F(DaemonInProcTelemetry, WithTelemetryOffReportSaysSoAndNothingIsSampled) {
  config_.telemetry_enabled = false;
  StartDaemon();
  SubmitOne();
  Turn();
  for (const json& request : {json{{"op", "report"}}, json{{"op", "history"}, {"gpu", 0}}, json{{"op", "usage"}, {"job_id", "1"}}}) {
    const json reply = Call(Root(), request);
    EXPECT_EQ(reply.value("ok", true), false) << reply.dump();
    EXPECT_EQ(reply.value("code", ""), "unavailable") << reply.dump();
    const std::string error = reply.value("error", "");
    EXPECT_TRUE(Contains(error, "telemetry is off on this daemon")) << request.dump() << ": " << reply.dump();
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  EXPECT_FALSE(fs::exists(fs::path(paths_.state_dir) / "history.db")) << "nothing sampled, nothing stored";
  EXPECT_EQ(Call(Root(), {{"op", "ping"}}).value("ok", false), true) << "the daemon serves the rest";
}

}  // namespace
}  // namespace gpulane::test
