#pragma once
// A test fixture with a config file of its own: tests of the config file's tables (util/config.h)
// write a text there and load it as gpulane loads /etc/gpulane/config.toml or a user's file.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "util/config.h"

namespace gpulane::test {

/// Each test gets a fresh temporary folder (removed after it) holding `config.toml`.
class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpulane-config-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    file_ = (dir_ / "config.toml").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Writes `text` to the file (replacing what was there) and loads it into `config`, as the
  /// machine's file (`trusted`) or a user's own; the Status is LoadConfigFile's.
  Status Load(const std::string& text, Config& config, bool trusted = true) {
    std::ofstream(file_, std::ios::trunc) << text;
    return LoadConfigFile(file_, trusted, config);
  }
  /// The one-line error of loading `text`, "" when it loads.
  std::string ErrorOf(const std::string& text, bool trusted = true) {
    Config config;
    Status s = Load(text, config, trusted);
    return s.ok() ? "" : s.error().message;
  }

  std::filesystem::path dir_;
  std::string file_;
};

}  // namespace gpulane::test
