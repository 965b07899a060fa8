// The config file the Debian package installs as /etc/gpulane/config.toml (packaging/config.toml):
// every key commented out with its default. Checked against the loader (uncommented, every value
// must be accepted, so no key is misspelt or stale) and against docs/config.md (every documented
// key is there), so the file cannot drift from either.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "support/harness.h"
#include "util/config.h"

namespace gpulane {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = fs::path(test::WebSourceDir()).parent_path();

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The file with every setting uncommented: "#key = v" and "#[table]" lose their "#"; "## text" stays.
std::string Uncommented(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0 && line.rfind("##", 0) != 0 && line.size() > 1 && line[1] != ' ') line.erase(0, 1);
    out += line + "\n";
  }
  return out;
}

// (table, key) of every commented setting: "#[lease]" then "#dir = ..." gives ("lease", "dir").
std::set<std::pair<std::string, std::string>> Settings(const std::string& text) {
  std::set<std::pair<std::string, std::string>> settings;
  std::istringstream in(text);
  std::string line, table;
  const std::regex header(R"(^#\[([a-z_.]+)\]$)"), key(R"(^#("?[@a-z_]+"?) = )");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, header)) table = m[1];
    else if (std::regex_search(line, m, key)) settings.insert({table, m[1]});
  }
  return settings;
}

TEST(PackagedConfig, EveryCommentedSettingIsAcceptedByTheLoader) {
  const std::string text = Read(kSource / "packaging/config.toml");
  ASSERT_FALSE(text.empty());
  const fs::path file = fs::temp_directory_path() / ("gpulane-packaged-config-" + std::to_string(getpid()) + ".toml");
  std::ofstream(file) << Uncommented(text);
  Config config;
  Status loaded = LoadConfigFile(file.string(), /*trusted=*/true, config);
  fs::remove(file);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(config.kill_grace_s, 10) << "the file lists the defaults";
  ASSERT_EQ(config.partitions.size(), 1u);
  EXPECT_EQ(config.default_partition, "day");
}

TEST(PackagedConfig, ListsEveryKeyDocsConfigMdDocuments) {
  const auto settings = Settings(Read(kSource / "packaging/config.toml"));
  const std::string doc = Read(kSource / "docs/config.md");
  const std::regex row(R"(\n\| `([a-z_]+)\.([a-z_]+)`(?:, `[a-z_]+\.([a-z_]+)`)? \|)");
  int documented = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator(); ++it) {
    const std::string table = (*it)[1];
    for (int k : {2, 3}) {
      if (!(*it)[k].matched) continue;
      ++documented;
      EXPECT_TRUE(settings.count({table, (*it)[k]})) << table << "." << (*it)[k] << " is missing from packaging/config.toml";
    }
  }
  EXPECT_GT(documented, 40) << "docs/config.md's key table was not found";
  for (const char* key : {"gpus", "windows", "max_time_limit", "max_gpus_per_user", "ends"})
    EXPECT_TRUE(settings.count({"partitions.day", key})) << "partitions.NAME." << key;
}

}  // namespace
}  // namespace gpulane
