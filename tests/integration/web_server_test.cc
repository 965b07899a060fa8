// gpulane-web through the real binaries and the fake NVML (issue 11, items 5 and 6): the daemon
// starts it ([web] listen), restarts it when it dies and stops it at exit, as nobody for the system
// daemon; /metrics is Prometheus text a real parser (Debian's python3-prometheus-client) reads; it
// answers only GET and HEAD, only to the host names it is known by, and hides command lines unless
// web.show_commands.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/http_client.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/web_daemon.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSystemPython = "/usr/bin/python3";  // Debian's, where python3-prometheus-client installs

// Every sample of Prometheus text `text` as prometheus_client's parser reads it, one line each:
// "<family> <type> <sample name> <labels k=v,...> <value>"; the parser's error when it fails.
RunResult ParseWithPrometheusClient(const TestDaemon& d, const std::string& text) {
  const fs::path file = d.dir() / "metrics.txt";
  std::ofstream(file) << text;
  const std::string script =
      "import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families\n"
      "for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
      "    for s in f.samples:\n"
      "        labels = ','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))\n"
      "        print(f.name, f.type, s.name, labels, s.value)\n";
  Child python({kSystemPython, "-c", script, file.string()}, {});
  return python.Wait(30).value_or(RunResult{});
}

json JsonOf(const HttpResponse& r) { return json::parse(r.body, nullptr, false); }

TEST(WebServer, MetricsOverHttpAreReadByPrometheusClientsParser) {
  DaemonOptions options;
  options.state = IdleGpus(2);
  options.state->at("devices")[0]["energy_mj"] = 5000000;
  SetUtilization(options.state->at("devices")[1], 55);
  options.config = kWebConfig;
  TestDaemon d(options);
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  HttpResponse r;
  ASSERT_TRUE(Eventually([&] {
    r = HttpGet(port, "/metrics");
    return r.status == 200 && Contains(r.body, "DCGM_FI_DEV_GPU_UTIL{");
  }, 30)) << r.status << " " << r.error << r.body;
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u) << "no CORS headers";
  RunResult parsed = ParseWithPrometheusClient(d, r.body);
  ASSERT_EQ(parsed.exit_code, 0) << "install python3-prometheus-client (scripts/test.sh does): " << parsed.err;
  const std::string uuid1 = d.machine().state()["devices"][1]["uuid"];
  // GPU 1's utilisation, with dcgm-exporter's labels (sorted by name: upper case first).
  std::string util1;
  for (const auto& line : Lines(parsed.out))
    if (line.rfind("DCGM_FI_DEV_GPU_UTIL gauge DCGM_FI_DEV_GPU_UTIL ", 0) == 0 && Contains(line, "UUID=" + uuid1 + ",")) util1 = line;
  EXPECT_TRUE(Contains(util1, ",device=nvidia1,gpu=1,modelName=NVIDIA H200,pci_bus_id=00000000:28:00.0 55.0")) << parsed.out;
  EXPECT_TRUE(Contains(parsed.out, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")) << parsed.out;
  EXPECT_TRUE(Contains(parsed.out, "gpulane_queue_wait_seconds histogram")) << parsed.out;
  // HEAD: the headers alone.
  HttpResponse head = HttpRequest(port, "HEAD", "/metrics", "localhost:" + std::to_string(port));
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
}

TEST(WebServer, AnswersOnlyGetAndHeadAndOnlyToItsOwnHostNames) {
  DaemonOptions options;
  options.config = "[web]\nlisten = \"127.0.0.1:0\"\nallowed_hosts = [\"gpu01.example.org\"]\n";
  TestDaemon d(options);
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  const std::string p = ":" + std::to_string(port);
  for (const std::string& host : std::vector<std::string>{"127.0.0.1" + p, "localhost" + p, "LOCALHOST", "[::1]" + p, "gpu01.example.org" + p}) {
    HttpResponse ok = HttpRequest(port, "GET", "/api/v1/server", host);
    EXPECT_EQ(ok.status, 200) << host << ": " << ok.body;
  }
  // DNS rebinding: a page of another site whose name resolves to 127.0.0.1.
  for (const std::string& host : std::vector<std::string>{"evil.example" + p, "127.0.0.1.evil.example" + p, "gpu01.example.org.evil" + p, ""}) {
    for (const char* path : {"/metrics", "/api/v1/status", "/", "/app.js"}) {
      HttpResponse refused = HttpRequest(port, "GET", path, host);
      EXPECT_EQ(refused.status, 403) << host << " " << path << ": " << refused.body;
      EXPECT_TRUE(Contains(refused.body, "web.allowed_hosts")) << refused.body;
      EXPECT_FALSE(Contains(refused.body, "DCGM_FI")) << refused.body;
    }
  }
  // Read-only: every other method is refused before anything is done, naming what is allowed.
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    HttpResponse refused = HttpRequest(port, method, "/api/v1/status", "127.0.0.1" + p, "{\"op\":\"cancel\"}");
    EXPECT_EQ(refused.status, 405) << method << ": " << refused.body;
    EXPECT_EQ(refused.headers["allow"], "GET, HEAD") << method;
  }
  // Bounded requests: an oversized URI is refused, and the server goes on.
  EXPECT_EQ(HttpRequest(port, "GET", "/api/v1/history?gpu=0&x=" + std::string(20000, 'a'), "127.0.0.1" + p).status, 414);
  EXPECT_EQ(HttpGet(port, "/api/v1/server").status, 200);
  EXPECT_EQ(HttpGet(port, "/no/such/page").status, 404);
}

TEST(WebServer, ApiGivesStatusQueueHistoryAndReportWithoutCommandLines) {
  DaemonOptions options;
  options.config = kWebConfig;
  TestDaemon d(options);
  Child secret = StartProcess({"/bin/sh", "-c", "sleep 600", "secret-token-42"});
  AddProcess(d.machine().state()["devices"][0], static_cast<std::uint32_t>(secret.pid()), 3ULL << 30);
  SetUtilization(d.machine().state()["devices"][0], 30);
  d.machine().Save();
  const std::int64_t held = d.Submit({"--hold", "--name", "waits", "--", "/bin/sh", "-c", "echo secret-token-42"});
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  json status;
  ASSERT_TRUE(Eventually([&] {
    status = JsonOf(HttpGet(port, "/api/v1/status"));
    return status.is_object() && status["gpus"].size() == 2 && !status["gpus"][0]["processes"].empty() &&
           status["gpus"][0]["reading"].value("util_gpu_pct", -1) == 30;
  }, 30)) << status.dump();
  EXPECT_EQ(status["gpus"][0]["processes"][0]["pid"], secret.pid());
  EXPECT_EQ(status["gpus"][0]["processes"][0]["memory_bytes"], 3ULL << 30);
  EXPECT_EQ(status["gpus"][1]["uuid"], d.machine().state()["devices"][1]["uuid"]);
  EXPECT_TRUE(status["telemetry"].get<bool>());
  ASSERT_EQ(status["queue"].size(), 1u);
  EXPECT_EQ(status["queue"][0]["id"], std::to_string(held));
  EXPECT_EQ(status["queue"][0]["state"], "held");
  EXPECT_FALSE(Contains(status.dump(), "secret-token-42")) << "command lines are hidden by default: " << status.dump();
  json queue = JsonOf(HttpGet(port, "/api/v1/queue"));
  ASSERT_EQ(queue["jobs"].size(), 1u) << queue.dump();
  EXPECT_EQ(queue["jobs"][0]["name"], "waits");
  EXPECT_FALSE(Contains(queue.dump(), "secret-token-42"));
  json history;
  ASSERT_TRUE(Eventually([&] {
    history = JsonOf(HttpGet(port, "/api/v1/history?gpu=0&since=10m"));
    return history.is_object() && history.contains("points") && !history["points"].empty();
  }, 30)) << history.dump();
  EXPECT_EQ(history["points"].back()["util_gpu_pct"], 30);
  HttpResponse bad = HttpGet(port, "/api/v1/history?gpu=zero");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(Contains(JsonOf(bad).value("error", ""), "gpu=zero: give a GPU index")) << bad.body;
  EXPECT_EQ(HttpGet(port, "/api/v1/history?gpu=7").status, 404) << "no GPU 7: the daemon's not_found";
  HttpResponse report = HttpGet(port, "/api/v1/report?since=1d&by=user");
  EXPECT_EQ(report.status, 200) << report.body;
  EXPECT_TRUE(JsonOf(report)["rows"].is_array()) << report.body;
  json anomalies = JsonOf(HttpGet(port, "/api/v1/anomalies"));
  EXPECT_EQ(anomalies["supported"], true) << anomalies.dump();
  EXPECT_TRUE(anomalies["anomalies"].is_array()) << anomalies.dump();
}

// The dashboard's anomalies: what the daemon's sampler raised (an Xid draining GPU 1), and
// "not supported" when the daemon's telemetry is off.
TEST(WebServer, AnomaliesAreTheDaemonsCurrentOnesAndTheLastDaysEvents) {
  DaemonOptions options;
  json state = IdleGpus(2);
  state["devices"][1]["xids"] = json::array();
  options.state = state;
  options.config = kWebConfig;  // telemetry every 200 ms
  TestDaemon d(options);
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  ASSERT_TRUE(Eventually([&] { return d.Call({{"op", "telemetry"}}).value("time_s", 0.0) > 0; }, 30));
  d.machine().state()["devices"][1]["xids"].push_back(79);
  d.machine().Save();
  json anomalies;
  ASSERT_TRUE(Eventually([&] {
    anomalies = JsonOf(HttpGet(port, "/api/v1/anomalies"));
    return anomalies.is_object() && anomalies.value("anomalies", json::array()).size() == 1;
  }, 30)) << anomalies.dump() << d.Log();
  const json& a = anomalies["anomalies"][0];
  EXPECT_EQ(a["kind"], "xid");
  EXPECT_EQ(a["gpu_index"], 1);
  EXPECT_EQ(a["drains"], true);
  EXPECT_TRUE(Contains(a.value("message", ""), "GPU 1 raised Xid 79")) << a.dump();
  ASSERT_FALSE(anomalies["recent"].empty()) << anomalies.dump();
  EXPECT_EQ(anomalies["recent"][0]["kind"], "xid");

  DaemonOptions off;
  off.config = "[web]\nlisten = \"127.0.0.1:0\"\n[telemetry]\nenabled = false\n";
  TestDaemon quiet(off);
  const int quiet_port = WebPort(quiet);
  ASSERT_GT(quiet_port, 0);
  HttpResponse none = HttpGet(quiet_port, "/api/v1/anomalies");
  EXPECT_EQ(none.status, 200) << none.body;
  EXPECT_EQ(JsonOf(none)["supported"], false) << none.body;
}

TEST(WebServer, ShowCommandsShowsProcessAndJobCommandLines) {
  DaemonOptions options;
  options.config = "[web]\nlisten = \"127.0.0.1:0\"\nshow_commands = true\n";
  TestDaemon d(options);
  Child secret = StartProcess({"/bin/sh", "-c", "sleep 600", "visible-token-7"});
  AddProcess(d.machine().state()["devices"][1], static_cast<std::uint32_t>(secret.pid()), 1ULL << 30);
  d.machine().Save();
  d.Submit({"--hold", "--", "echo", "job-token-8"});
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  json status;
  ASSERT_TRUE(Eventually([&] {
    status = JsonOf(HttpGet(port, "/api/v1/status"));
    return status.is_object() && !status["gpus"][1]["processes"].empty();
  }, 30)) << status.dump();
  EXPECT_TRUE(Contains(status["gpus"][1]["processes"][0].value("cmdline", ""), "visible-token-7")) << status.dump();
  EXPECT_EQ(status["queue"][0]["command"], "echo job-token-8");
  EXPECT_FALSE(status["telemetry"].get<bool>()) << "this daemon runs no sampler: readings come from the snapshot";
}

TEST(WebServer, DaemonRestartsItWhenItDiesAndStopsItAtExit) {
  DaemonOptions options;
  options.config = kWebConfig;  // with the sampler's thread, which must not take the daemon's SIGTERM
  TestDaemon d(options);
  const int first_port = WebPort(d, 1);
  const pid_t first = WebPid(d, 1);
  ASSERT_GT(first, 0);
  EXPECT_EQ(HttpGet(first_port, "/api/v1/server").status, 200);
  ASSERT_EQ(kill(first, SIGKILL), 0);
  const int second_port = WebPort(d, 2);
  ASSERT_GT(second_port, 0) << d.Log();
  const pid_t second = WebPid(d, 2);
  EXPECT_NE(second, first);
  EXPECT_TRUE(Contains(d.Log(), fmt::format("web: gpulane-web (pid {}) was killed by signal 9; starting it again in 1 s", first)))
      << d.Log();
  EXPECT_EQ(HttpGet(second_port, "/api/v1/server").status, 200);
  // The daemon stops it when it stops (SIGTERM), and it is reaped: no process is left.
  ASSERT_EQ(kill(d.pid(), SIGTERM), 0);
  auto code = d.WaitForExit(30);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0) << d.Log();
  EXPECT_TRUE(Contains(d.Log(), "stopped; running jobs go on under their supervisors")) << d.Log();
  EXPECT_NE(kill(second, 0), 0) << "gpulane-web outlived its daemon";
  EXPECT_NE(HttpRequest(second_port, "GET", "/api/v1/server", "localhost", "", 2).status, 200);
}

TEST(WebServer, ItEndsWhenItsDaemonIsKilled) {
  DaemonOptions options;
  options.config = "[web]\nlisten = \"127.0.0.1:0\"\n";
  TestDaemon d(options);
  ASSERT_GT(WebPort(d), 0);
  const pid_t web = WebPid(d);
  d.Kill9();
  // Its parent-death signal ends it; the test process is no parent of it, so it is gone for good.
  EXPECT_TRUE(Eventually([&] { return kill(web, 0) != 0 || Contains(ReadFile(fmt::format("/proc/{}/stat", web)), ") Z "); }, 10));
}

TEST(WebServer, SystemDaemonRunsItAsNobody) {
  if (geteuid() != 0) GTEST_SKIP() << "a system-mode daemon runs as root";
  DaemonOptions options;
  options.system_mode = true;
  options.config = "[web]\nlisten = \"127.0.0.1:0\"\n";
  TestDaemon d(options);
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  const pid_t web = WebPid(d);
  const std::string proc = ReadFile(fmt::format("/proc/{}/status", web));
  EXPECT_TRUE(Contains(proc, "\nUid:\t65534\t65534\t65534\t65534\n")) << proc;
  EXPECT_TRUE(Contains(proc, "\nGid:\t65534\t65534\t65534\t65534\n")) << proc;
  const auto groups = proc.find("\nGroups:");
  ASSERT_NE(groups, std::string::npos) << proc;
  EXPECT_EQ(proc.substr(groups + 8, proc.find('\n', groups + 1) - groups - 8).find_first_of("0123456789"), std::string::npos)
      << "no supplementary groups: " << proc;
  EXPECT_TRUE(Contains(d.Log(), "as uid 65534")) << d.Log();
  // As nobody it still reaches the system socket (mode 0666) and answers.
  json status;
  ASSERT_TRUE(Eventually([&] {
    status = JsonOf(HttpGet(port, "/api/v1/status"));
    return status.is_object() && status.contains("gpus");
  }, 30)) << status.dump();
  EXPECT_EQ(status["gpus"].size(), 2u);
}

TEST(WebServer, BadCommandLinesAndBusyPortsAreOneLineErrors) {
  auto run = [](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {WebBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    Child web(argv, {});
    return web.Wait(30).value_or(RunResult{});
  };
  auto one_line = [](const RunResult& r, int code, const std::string& part) {
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_TRUE(r.err.rfind("gpulane-web: error: ", 0) == 0) << r.err;
    EXPECT_TRUE(Contains(r.err, part)) << r.err;
  };
  one_line(run({"--listen", "9470", "--socket", "/tmp/x.sock"}), 2, "listen address '9470' has no port: give HOST:PORT");
  one_line(run({"--socket", "/tmp/x.sock"}), 2, "--listen HOST:PORT is required");
  one_line(run({"--listen", "127.0.0.1:0"}), 2, "--socket PATH is required");
  one_line(run({"--listen", "127.0.0.1:0", "--socket", "/tmp/x.sock", "--static", "/nonexistent"}), 2, "no index.html there");
  // A port another server holds.
  DaemonOptions options;
  options.config = "[web]\nlisten = \"127.0.0.1:0\"\n";
  TestDaemon d(options);
  const int port = WebPort(d);
  ASSERT_GT(port, 0);
  one_line(run({"--listen", fmt::format("127.0.0.1:{}", port), "--socket", d.socket()}), 1,
           fmt::format("cannot listen on 127.0.0.1:{}: Address already in use", port));
  RunResult help = run({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(Contains(help.err, "usage: gpulane-web --listen HOST:PORT --socket PATH")) << help.err;
}

TEST(WebServer, ConfigErrorsNameFileLineAndFix) {
  TestDaemon d(DaemonOptions{.config = "[web]\nlisten = \"nowhere\"\n", .start = false});
  RunResult r = d.Gpulane({"queue"});
  EXPECT_TRUE(IsGpulaneError(r, 2, "config.toml:2: web.listen: listen address 'nowhere' has no port")) << r.err;
}

}  // namespace
}  // namespace gpulane::test
