// The dashboard in real headless Chromium (issue 11, item 6, "Tested as a user would"): Debian's
// chromium driven by playwright-core (web/test/dashboard.mjs) against a daemon on three fake GPUs.
// The page loads with no console error, shows every GPU, the queue shows a submitted job, history on
// demand draws a chart, and a GPU's live chart follows a change of the fake NVML. scripts/test.sh
// installs chromium, Node.js and web/node_modules: when one is missing the test fails, naming it,
// unless GPULANE_SKIP_BROWSER_TESTS=1 says to skip it.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/text.h"
#include "support/web_daemon.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

// Which tool the browser test lacks ("" when none): chromium, node, playwright-core.
std::string MissingTool() {
  if (access("/usr/bin/chromium", X_OK) != 0) return "/usr/bin/chromium (Debian's chromium package)";
  if (access("/usr/bin/node", X_OK) != 0 && access("/usr/local/bin/node", X_OK) != 0) return "node (Node.js)";
  if (!fs::exists(fs::path(WebSourceDir()) / "node_modules/playwright-core/package.json"))
    return "web/node_modules/playwright-core (npm ci in web/)";
  return "";
}

TEST(WebDashboard, ChromiumShowsEveryGpuItsLiveChartAndTheQueue) {
  if (const std::string missing = MissingTool(); !missing.empty()) {
    const char* skip = std::getenv("GPULANE_SKIP_BROWSER_TESTS");
    if (skip && std::string(skip) == "1") GTEST_SKIP() << "GPULANE_SKIP_BROWSER_TESTS=1, and " << missing << " is missing";
    FAIL() << missing << " is missing: scripts/test.sh installs it (GPULANE_SKIP_BROWSER_TESTS=1 skips this test)";
  }
  DaemonOptions options;
  options.state = IdleGpus(3);
  options.config = kWebConfig;
  TestDaemon d(options);
  const std::int64_t job = d.Submit({"--hold", "--name", "dashboard-job", "--", "true"});
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  std::vector<std::string> argv = {"/usr/bin/env", "node", WebSourceDir() + "/test/dashboard.mjs",
                                   "--url", "http://127.0.0.1:" + std::to_string(port) + "/",
                                   "--gpus", "3", "--job", std::to_string(job),
                                   "--state", (d.dir() / "nvml.json").string()};
  if (const char* shot = std::getenv("GPULANE_DASHBOARD_SCREENSHOT"); shot && *shot) argv.insert(argv.end(), {"--screenshot", shot});
  Child browser(argv, {});
  auto r = browser.Wait(90);
  if (!r) browser.Kill(9);
  ASSERT_TRUE(r) << "the browser test did not end within 90 s: " << browser.OutSoFar() << browser.ErrSoFar();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  for (const char* step : {"ok the page loads", "ok a card for each of the 3 GPUs", "ok the queue shows job",
                           "ok history on demand draws GPU 0's last hour",
                           "ok GPU 1's chart and card follow the fake NVML to 87 %", "ok no console errors"})
    EXPECT_TRUE(Contains(r->out, step)) << step << "\n" << r->out << r->err;
}

}  // namespace
}  // namespace gpulane::test
