// No exception ends the daemon (daemon/guard.h), and requests nested too deeply for code that walks
// them recursively are recognised before they are parsed (proto::NestingDepth).
#include "daemon/guard.h"

#include <gtest/gtest.h>

#include <new>
#include <nlohmann/json.hpp>
#include <system_error>

#include "proto/wire.h"

namespace gpulane::daemon {
namespace {

TEST(RunGuarded, AStepThatReturnsIsNotLogged) {
  std::vector<std::string> log;
  int ran = 0;
  auto error = RunGuarded("testing", [&] { ++ran; }, [&](const std::string& line) { log.push_back(line); });
  EXPECT_FALSE(error);
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(log.empty());
}

TEST(RunGuarded, UnexpectedExceptionsAreLoggedAndSwallowed) {
  std::vector<std::string> log;
  LogSink sink = [&](const std::string& line) { log.push_back(line); };
  auto type_error = RunGuarded("handling a request", [] { (void)nlohmann::json("text").get<int>(); }, sink);
  ASSERT_TRUE(type_error);
  EXPECT_NE(type_error->find("type must be number"), std::string::npos) << *type_error;
  auto bad_alloc = RunGuarded("launching jobs", [] { throw std::bad_alloc(); }, sink);
  ASSERT_TRUE(bad_alloc);
  EXPECT_EQ(*bad_alloc, std::bad_alloc().what());
  auto system_error = RunGuarded("accepting connections",
                                 [] { throw std::system_error(std::make_error_code(std::errc::too_many_files_open), "accept"); }, sink);
  ASSERT_TRUE(system_error);
  EXPECT_NE(system_error->find("accept"), std::string::npos);
  auto unknown = RunGuarded("reading signals", [] { throw 42; }, sink);
  ASSERT_TRUE(unknown);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[1], std::string("unexpected error while launching jobs: ") + std::bad_alloc().what() + "; going on");
  EXPECT_EQ(log[3], "unexpected error while reading signals: an exception of unknown type; going on");
}

TEST(RunGuarded, ALogThatThrowsToo) {
  auto error = RunGuarded("testing", [] { throw std::runtime_error("first"); },
                          [](const std::string&) { throw std::bad_alloc(); });
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "first");
}

TEST(NestingDepth, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(proto::NestingDepth("2"), 0u);
  EXPECT_EQ(proto::NestingDepth(R"({"v":2,"op":"ping"})"), 1u);
  EXPECT_EQ(proto::NestingDepth(R"({"spec":{"request":{"allowed_uuids":["GPU-1"]}},"ids":[1]})"), 4u);
  EXPECT_EQ(proto::NestingDepth(R"({"a":"[[[[{{{{","b":"\"[[[["})"), 1u) << "brackets in strings, escaped quotes";
  EXPECT_EQ(proto::NestingDepth(R"({"a":"\\","b":[[1]]})"), 3u) << "an escaped backslash ends its escape";
  EXPECT_EQ(proto::NestingDepth(std::string(100000, '[') + std::string(100000, ']')), 100000u);
  EXPECT_EQ(proto::NestingDepth("]]]}}"), 0u) << "unbalanced closings do not go below zero";
}

}  // namespace
}  // namespace gpulane::daemon
