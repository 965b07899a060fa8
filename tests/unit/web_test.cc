// gpulane-web's pure parts (src/web/, docs/web.md): its command line and [web] settings, the Host
// check against DNS rebinding, and the API's views of the daemon's replies, which hide command
// lines unless web.show_commands and never show a job's environment.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "proto/telemetry_json.h"
#include "util/config.h"
#include "util/listen_address.h"
#include "util/web_config.h"
#include "web/api.h"
#include "web/host_check.h"
#include "web/options.h"

namespace gpulane::web {
namespace {

using nlohmann::json;

TEST(WebOptions, ListenAddressesParseAndBadOnesNameTheFix) {
  auto v4 = ParseListen("127.0.0.1:9470");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9470);
  auto v6 = ParseListen("[::1]:0");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  for (const char* bad : {"9470", "localhost", ":9470", "host:", "host:70000", "host:-1", "::1:9470", "[::1]9470", "a b:1"}) {
    auto r = ParseListen(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("like \"127.0.0.1:9470\""), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
}

TEST(WebOptions, ArgumentsNeedListenAndSocket) {
  auto ok = ParseWebArgs({"--listen", "127.0.0.1:0", "--socket", "/run/x.sock", "--show-commands", "--allow-host", "gpu01",
                          "--peer", "http://gpu02:9470/"});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->show_commands);
  EXPECT_EQ(ok->allowed_hosts, std::vector<std::string>{"gpu01"});
  EXPECT_EQ(ok->peers, std::vector<std::string>{"http://gpu02:9470/"});
  EXPECT_FALSE(ParseWebArgs({"--socket", "/s"}));
  EXPECT_FALSE(ParseWebArgs({"--listen", "127.0.0.1:1"}));
  EXPECT_FALSE(ParseWebArgs({"--listen"}));
  EXPECT_FALSE(ParseWebArgs({"--listen", "127.0.0.1:1", "--socket", "/s", "--frobnicate"}));
  EXPECT_FALSE(ParseWebArgs({"--listen", "127.0.0.1:1", "--socket", "/s", "--peer", "javascript:alert(1)"}));
  EXPECT_FALSE(ParseWebArgs({"--listen", "127.0.0.1:1", "--socket", "/s", "--peer", "http://a/\" onload=\"x"}));
  EXPECT_TRUE(ParseWebArgs({"--help"})->help);
}

TEST(WebHostCheck, OnlyTheNamesTheServerIsKnownByAreAnswered) {
  const auto allowed = AllowedHosts("127.0.0.1", {"GPU01.example.org"});
  for (const char* good : {"127.0.0.1:9470", "localhost", "LOCALHOST:9470", "[::1]:9470", "gpu01.example.org:80", "127.0.0.1"})
    EXPECT_TRUE(HostAllowed(good, allowed)) << good;
  for (const char* bad : {"", "evil.example:9470", "127.0.0.1.evil.example", "localhost.", "127.0.0.1:x", "[::1", "a@127.0.0.1",
                          "gpu01.example.org.evil:1", "localhost%00.evil", "localhost\\.evil", "localh\xc3\xb6st"})
    EXPECT_FALSE(HostAllowed(bad, allowed)) << bad;
  // A wildcard listen address is no name; a concrete one is.
  EXPECT_FALSE(HostAllowed("0.0.0.0:9470", AllowedHosts("0.0.0.0", {})));
  EXPECT_TRUE(HostAllowed("10.1.2.3:9470", AllowedHosts("10.1.2.3", {})));
  EXPECT_TRUE(HostAllowed("[fd00::1]:9470", AllowedHosts("fd00::1", {})));
}

json Snapshot() {
  return {{"devices",
           {{{"pci_index", 0}, {"uuid", "GPU-a"}, {"name", "NVIDIA H200"}, {"pci_bus_id", "00000000:18:00.0"},
             {"utilization_gpu_pct", 40}, {"memory_used_bytes", 1}, {"memory_total_bytes", 2}, {"power_limit_mw", 700000},
             {"processes",
              {{{"pid", 42}, {"user", "alice"}, {"used_memory_bytes", 3}, {"command", "python"},
                {"cmdline", "python train.py --token s3cret"}}}}}}}};
}

json Queue() {
  json spec = {{"argv", {"python", "train.py", "--token", "s3cret"}}, {"env", {"SECRET=1"}}, {"name", "train"},
               {"request", {{"count", 2}}}};
  return {{"jobs", {{{"id", 12}, {"id_text", "12"}, {"user", "bob"}, {"state", "pending"}, {"reason", "waiting, 1st in line"},
                     {"submit_time", 100.0}, {"spec", spec}}}}};
}

TEST(WebApi, StatusShowsReadingsUsersAndJobsButNoCommandLinesByDefault) {
  json telemetry = {{"time_s", 200.0},
                    {"gpus", {{{"index", 0}, {"uuid", "GPU-a"}, {"reading", {{"t", 199.0}, {"util_gpu_pct", 70}}}}}},
                    {"jobs", {{{"job_id", "12"}, {"user", "bob"}, {"gpu_uuid", "GPU-a"}, {"memory_bytes", 3}}}}};
  json hidden = StatusView(Snapshot(), telemetry, Queue(), false, "gpu01");
  EXPECT_EQ(hidden["hostname"], "gpu01");
  EXPECT_EQ(hidden["gpus"][0]["reading"]["util_gpu_pct"], 70) << "the sampler's reading over the snapshot's";
  EXPECT_EQ(hidden["gpus"][0]["reading"]["power_limit_mw"], 700000);
  EXPECT_EQ(hidden["gpus"][0]["processes"][0]["user"], "alice");
  EXPECT_EQ(hidden["gpus"][0]["jobs"][0]["job_id"], "12");
  EXPECT_EQ(hidden["queue"][0]["reason"], "waiting, 1st in line");
  EXPECT_EQ(hidden.dump().find("s3cret"), std::string::npos) << hidden.dump();
  EXPECT_EQ(hidden.dump().find("SECRET"), std::string::npos);
  json shown = StatusView(Snapshot(), nullptr, Queue(), true, "gpu01");
  EXPECT_EQ(shown["gpus"][0]["processes"][0]["cmdline"], "python train.py --token s3cret");
  EXPECT_EQ(shown["queue"][0]["command"], "python train.py --token s3cret");
  EXPECT_EQ(shown["gpus"][0]["reading"]["util_gpu_pct"], 40) << "without the sampler: the snapshot's";
  EXPECT_EQ(shown.dump().find("SECRET"), std::string::npos) << "a job's environment is never shown";
}

TEST(WebApi, QueriesBecomeDaemonRequestsAndBadOnesAreOneLine) {
  auto h = HistoryRequest({{"gpu", "1"}, {"since", "2h"}, {"resolution", "10"}}, 10000);
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_EQ((*h)["gpu"], 1);
  EXPECT_EQ((*h)["since_s"], 10000 - 7200);
  EXPECT_EQ((*h)["resolution_s"], 10);
  EXPECT_EQ((*HistoryRequest({{"gpu", "GPU-x"}}, 10000))["since_s"], 10000 - 3600);
  EXPECT_EQ((*HistoryRequest({{"gpu", "0"}, {"since_s", "123"}}, 10000))["since_s"], 123);
  for (const Query& bad : std::vector<Query>{{}, {{"gpu", "x"}}, {{"gpu", "-1"}}, {{"gpu", "0"}, {"resolution", "5"}},
                                              {{"gpu", "0"}, {"since", "yesterday"}}, {{"gpu", "0"}, {"since_s", "-4"}}}) {
    auto r = HistoryRequest(bad, 10000);
    ASSERT_FALSE(r);
    EXPECT_EQ(HttpStatusOf(r.error().kind), 400);
  }
  auto report = ReportRequest({{"by", "day"}, {"user", "alice"}}, 100000);
  ASSERT_TRUE(report);
  EXPECT_EQ((*report)["since_s"], 100000 - 86400);
  EXPECT_EQ((*report)["by"], "day");
  EXPECT_EQ((*report)["user"], "alice");
  EXPECT_FALSE(ReportRequest({{"by", "week"}}, 1));
}

TEST(WebApi, AChartsHistoryRequestAsksTheDaemonForFewPointsOfItsFieldsOnly) {
  auto request = ChartHistoryRequest({{"gpu", "3"}, {"since", "1h"}}, 100000, 600);
  ASSERT_TRUE(request);
  EXPECT_EQ((*request)["op"], "history");
  EXPECT_EQ((*request)["gpu"], 3);
  EXPECT_EQ((*request)["since_s"], 100000 - 3600);
  EXPECT_EQ((*request)["max_points"], 600);
  EXPECT_EQ((*request)["fields"], json({"util_gpu_pct", "memory_used_bytes", "memory_total_bytes"}));
  EXPECT_EQ((*request)["columns"], true) << "one array a field";
  EXPECT_FALSE(ChartHistoryRequest({{"gpu", "zero"}}, 100000, 600)) << "HistoryRequest's checks";
}

TEST(WebApi, ChartPointsAreThinnedEvenlyToTheirFields) {
  json points = json::array();
  for (int i = 0; i < 3600; ++i) points.push_back({{"t", i}, {"util_gpu_pct", i % 100}, {"power_mw", 5}, {"memory_used_bytes", 7}});
  json thin = ThinPoints(points, 600);
  ASSERT_EQ(thin.size(), 600u);
  EXPECT_EQ(thin.front()["t"], 0);
  EXPECT_EQ(thin.back()["t"], 3599) << "the latest point is kept";
  EXPECT_FALSE(thin[1].contains("power_mw")) << "only what the chart draws";
  EXPECT_EQ(thin[1]["memory_used_bytes"], 7);
  EXPECT_EQ(ThinPoints(json::array({{{"t", 1}}, {{"t", 2}}}), 600).size(), 2u) << "fewer points: all of them";
  EXPECT_TRUE(ThinPoints(json::array(), 600).empty());
}

TEST(WebApi, AChartsHistoryIsColumnsOrPointsFromEitherReply) {
  const json columns = {{"t", {1, 2, 3}}, {"util_gpu_pct", {5, nullptr, 7}}, {"memory_used_bytes", {8, 8, 8}},
                        {"memory_total_bytes", {9, 9, 9}}};
  const json reply = {{"gpu", 0}, {"columns", columns}};
  EXPECT_EQ(ChartHistory(reply, 600, true), columns) << "the daemon's columns as they are";
  json rows = ChartHistory(reply, 600, false);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], json({{"t", 1}, {"util_gpu_pct", 5}, {"memory_used_bytes", 8}, {"memory_total_bytes", 9}}));
  EXPECT_FALSE(rows[1].contains("util_gpu_pct")) << "a missing field stays absent in the rows";
  // A daemon older than `columns` answers with points: thinned, and turned into columns if asked.
  json points = json::array();
  for (int i = 0; i < 3600; ++i) points.push_back({{"t", i}, {"util_gpu_pct", i % 100}, {"power_mw", 5}});
  const json old = {{"gpu", 0}, {"points", points}};
  EXPECT_EQ(ChartHistory(old, 600, false), ThinPoints(points, 600));
  json c = ChartHistory(old, 600, true);
  ASSERT_EQ(c["t"].size(), 600u);
  EXPECT_EQ(c["t"].back(), 3599);
  EXPECT_TRUE(c["memory_used_bytes"][0].is_null());
  EXPECT_FALSE(c.contains("power_mw"));
  EXPECT_EQ(proto::PointsToColumns(json::array({{{"t", 1}, {"a", 2}}, {{"t", 3}, {"b", 4}}})),
            json({{"t", {1, 3}}, {"a", {2, nullptr}}, {"b", {nullptr, 4}}})) << "no fields: every field met";
}

TEST(WebApi, ColumnsStraightFromPointsAreThoseOfTheirJson) {
  std::vector<telemetry::GpuPoint> points(3);
  for (std::size_t i = 0; i < points.size(); ++i) points[i].time_s = 100.5 + i;
  points[0].reading.util_gpu_pct = 40;
  points[0].reading.memory_used_bytes = 1ULL << 33;
  points[0].reading.memory_total_bytes = 1ULL << 37;
  points[1].reading.xid_errors = 2;
  points[1].reading.failed = true;
  points[2].reading.power_mw = 700000;
  points[2].reading.clocks_event_reasons = 0x20;
  const std::vector<std::string> fields = {"util_gpu_pct", "util_memory_pct", "memory_used_bytes", "memory_total_bytes",
                                           "power_mw", "temperature_c", "clock_sm_mhz", "clock_mem_mhz", "energy_mj",
                                           "clocks_event_reasons", "xid_errors", "failed", "no_such_field"};
  const std::vector<std::size_t> at = {0, 2};
  json objects = json::array();
  for (std::size_t i : at) objects.push_back(proto::PointToJson(points[i]));
  EXPECT_EQ(proto::GpuPointsToColumns(points, at, fields), proto::PointsToColumns(objects, fields));
  objects = json::array();
  for (const auto& p : points) objects.push_back(proto::PointToJson(p));
  EXPECT_EQ(proto::GpuPointsToColumns(points, {0, 1, 2}, fields), proto::PointsToColumns(objects, fields));
}

// Every user's daemon wanted the machine's port 9470 (issue 24): the second user's dashboard failed
// in its log and the URL showed the first user's. A per-user daemon takes its own port unless the
// user's own file names one.
TEST(WebConfig, PerUserDaemonsNeverTakeTheMachinesPort) {
  Config config;
  const std::string fallback = config.web_listen;  // no machine file
  EXPECT_EQ(WebListenFor(config, fallback, true), "127.0.0.1:9470");
  EXPECT_EQ(WebListenFor(config, fallback, false), "127.0.0.1:0");
  config.web_listen = "0.0.0.0:9470";  // the machine's file
  EXPECT_EQ(WebListenFor(config, "0.0.0.0:9470", true), "0.0.0.0:9470");
  EXPECT_EQ(WebListenFor(config, "0.0.0.0:9470", false), "127.0.0.1:0") << "the machine's address is the system daemon's";
  config.web_listen = "off";
  EXPECT_EQ(WebListenFor(config, "off", false), "off") << "the machine's file turns the web off for everyone";
  config.web_listen = "127.0.0.1:9555";  // the user's own file
  EXPECT_EQ(WebListenFor(config, fallback, false), "127.0.0.1:9555") << "the user's own choice, as written";
}

TEST(WebConfig, WebTableIsReadAndBadValuesNameKeyAndLine) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpulane-web-config-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto file = (dir / "config.toml").string();
  auto load = [&](const std::string& text, Config& config) {
    std::ofstream(file) << text;
    return LoadConfigFile(file, false, config);
  };
  Config config;
  EXPECT_EQ(config.web_listen, "127.0.0.1:9470");
  ASSERT_TRUE(load("[web]\nlisten = \"[::1]:9471\"\nshow_commands = true\nallowed_hosts = [\"gpu01\"]\n"
                   "peers = [\"http://gpu02:9470/\"]\n", config));
  EXPECT_EQ(config.web_listen, "[::1]:9471");
  EXPECT_TRUE(config.web_show_commands);
  EXPECT_EQ(config.web_allowed_hosts, std::vector<std::string>{"gpu01"});
  EXPECT_EQ(config.web_peers, std::vector<std::string>{"http://gpu02:9470/"});
  ASSERT_TRUE(load("[web]\nlisten = \"off\"\n", config));
  EXPECT_EQ(config.web_listen, "off");
  struct Case {
    const char* text;
    const char* part;
  };
  for (const Case& c : {Case{"[web]\n\nlisten = \"9470\"\n", ":3: web.listen: listen address '9470' has no port"},
                        Case{"[web]\nshow_commands = \"yes\"\n", ":2: web.show_commands must be true or false"},
                        Case{"[web]\nallowed_hosts = [\"http://x/\"]\n", ":2: web.allowed_hosts must be a list"},
                        Case{"[web]\npeers = \"http://x/\"\n", ":2: web.peers must be a list"},
                        Case{"[web]\nport = 1\n", "unknown key web.port (known: listen, show_commands, allowed_hosts, peers)"}}) {
    Config fresh;
    Status s = load(c.text, fresh);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.error().message.find(c.part), std::string::npos) << s.error().message;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpulane::web
