// util/bytes_json.h and the spec codec that uses it: argv, environment, directory and log paths
// survive JSON (the protocol, the store, the supervisor's spec file) byte for byte.
#include "util/bytes_json.h"

#include <random>

#include <gtest/gtest.h>

#include "store/job.h"

namespace gpulane {
namespace {

using nlohmann::json;

TEST(Base64, Rfc4648TestVectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}, {"\xff\xfe", "//4="}};
  for (auto [plain, encoded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    EXPECT_EQ(Base64Decode(encoded), std::optional<std::string>(plain)) << encoded;
  }
}

TEST(Base64, AnythingButCanonicalPaddedBase64IsRefused) {
  for (const char* bad : {"Zg", "Zg=", "Zm9", "Zh==", "Zm9=", "Z===", "====", "Zm=v", "Zg==Zg==", "Zm9v\n", "Zm 9v", "Zm-_"})
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
}

TEST(BytesJson, Utf8StaysAStringOtherBytesBecomeBase64) {
  EXPECT_EQ(BytesToJson("printf"), json("printf"));
  EXPECT_EQ(BytesToJson("caf\xc3\xa9 \x1b]52;c;aGkK\x07"), json("caf\xc3\xa9 \x1b]52;c;aGkK\x07"));
  EXPECT_EQ(BytesToJson("\xff\xfe"), (json{{"b64", "//4="}}));
  std::string out = "untouched";
  for (const json& bad : {json(1), json(nullptr), json::array(), json{{"b64", 1}}, json{{"b64", "Zg"}},
                          json{{"b64", "Zg=="}, {"more", 1}}, json{{"hex", "ff"}}})
    EXPECT_FALSE(BytesFromJson(bad, &out)) << bad.dump();
  EXPECT_EQ(out, "untouched");
  std::vector<std::string> list;
  EXPECT_FALSE(BytesListFromJson(json{{"argv", 1}}, &list));
  EXPECT_FALSE(BytesListFromJson(json::array({"a", 2}), &list));
}

// Random byte strings through the encoder, JSON text (a strict dump: it would throw on invalid
// UTF-8) and the decoder come back exactly.
TEST(BytesJson, RandomBytesRoundTripThroughJsonText) {
  std::mt19937 rng(14);
  for (int i = 0; i < 5000; ++i) {
    std::vector<std::string> values(rng() % 4);
    for (auto& v : values) {
      v.resize(rng() % 12);
      for (char& c : v) c = static_cast<char>(rng() % 2 ? 'a' + rng() % 26 : rng() % 256);
    }
    const std::string text = BytesListToJson(values).dump();
    std::vector<std::string> back;
    ASSERT_TRUE(BytesListFromJson(json::parse(text), &back)) << text;
    ASSERT_EQ(back, values) << text;
  }
}

store::JobSpec SpecWithBytes() {
  store::JobSpec spec;
  spec.argv = {"printf", "%s", "\xff\xfe", "caf\xc3\xa9"};
  spec.cwd = "/home/alice/dir\xff";
  spec.env = {"PATH=/usr/bin", "BYTES=\x80\x81", "\xfeKEY=v"};
  spec.output_path = "/tmp/out\xfe.log";
  spec.error_path = "/tmp/err\xfd.log";
  spec.name = "bytes";
  spec.request.user = "alice";
  spec.request.uid = 1000;
  return spec;
}

TEST(SpecJson, ArgvEnvironmentDirectoryAndPathsKeepTheirBytes) {
  const store::JobSpec spec = SpecWithBytes();
  const json j = store::SpecToJson(spec);
  EXPECT_EQ(j["argv"], json::array({"printf", "%s", json{{"b64", "//4="}}, "caf\xc3\xa9"}));
  EXPECT_EQ(j["cwd"], (json{{"b64", Base64Encode(spec.cwd)}}));
  EXPECT_EQ(j["env"][0], "PATH=/usr/bin");
  // What the store and the wire write (a strict dump) and read back.
  store::JobSpec back;
  ASSERT_TRUE(store::SpecFromJson(json::parse(j.dump()), &back).ok());
  EXPECT_EQ(back.argv, spec.argv);
  EXPECT_EQ(back.cwd, spec.cwd);
  EXPECT_EQ(back.env, spec.env);
  EXPECT_EQ(back.output_path, spec.output_path);
  EXPECT_EQ(back.error_path, spec.error_path);
  // The logs a supervisor records, too.
  store::JobLogs logs{"/tmp/out\xfe.log", "/tmp/err\xfd.log", 1, 2, std::nullopt, std::nullopt};
  EXPECT_EQ(store::LogsFromJson(json::parse(store::LogsToJson(logs).dump())), logs);
}

TEST(SpecJson, SpecsWrittenAsPlainStringsReadAsBefore) {
  const json old = json::parse(R"({"argv": ["sh", "-c", "echo hi"], "cwd": "/home/alice", "env": ["A=1"],
    "name": "x", "output_path": "o.log", "error_path": "", "kill_grace_s": 3,
    "request": {"count": 1, "uid": 1000, "user": "alice"}})");
  store::JobSpec spec;
  ASSERT_TRUE(store::SpecFromJson(old, &spec).ok());
  EXPECT_EQ(spec.argv, (std::vector<std::string>{"sh", "-c", "echo hi"}));
  EXPECT_EQ(spec.cwd, "/home/alice");
  EXPECT_EQ(spec.env, std::vector<std::string>{"A=1"});
  EXPECT_EQ(spec.output_path, "o.log");
  // And such a spec is written as it was: plain strings, no {"b64"} objects.
  const json again = store::SpecToJson(spec);
  for (const char* key : {"argv", "cwd", "env", "output_path", "error_path"}) EXPECT_EQ(again[key], old[key]) << key;
  // A byte field in neither form is refused with the one message.
  json broken = old;
  broken["argv"] = json::array({"sh", json{{"b64", "not base64"}}});
  EXPECT_FALSE(store::SpecFromJson(broken, &spec).ok());
  broken = old;
  broken["cwd"] = 5;
  EXPECT_FALSE(store::SpecFromJson(broken, &spec).ok());
  // NUL cannot reach the kernel (it would cut the argument short): refused in either form.
  broken = old;
  broken["argv"] = json::array({"sh", std::string("a\0b", 3)});
  EXPECT_FALSE(store::SpecFromJson(broken, &spec).ok());
  broken = old;
  broken["env"] = json::array({json{{"b64", Base64Encode(std::string("A=\0", 3))}}});
  EXPECT_FALSE(store::SpecFromJson(broken, &spec).ok());
}

}  // namespace
}  // namespace gpulane
