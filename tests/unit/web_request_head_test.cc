// gpulane-web's request heads judged before any worker sees them (src/web/request_head.h,
// issue 23 item 6): bounded in bytes and header lines however they arrive, strict about line ends
// and control bytes, the raw Host kept for the Host check, and query parameters that must decode
// to text (400 for %00 and invalid UTF-8, never a 500 further in).
#include <string>

#include <gtest/gtest.h>

#include "web/request_head.h"

namespace gpulane::web {
namespace {

using namespace std::string_literals;

RequestHead ScanWhole(const std::string& bytes, HeadLimits limits = {}) { return HeadScanner(limits).Scan(bytes); }

TEST(WebRequestHead, ACompleteHeadKeepsItsRawTargetAndHost) {
  const std::string head = "GET /api/v1/history?gpu=0 HTTP/1.1\r\nHost: localhost%00.evil\r\nAccept: */*\r\n\r\n";
  RequestHead h = ScanWhole(head + "GET /next");
  ASSERT_EQ(h.state, HeadState::kComplete);
  EXPECT_EQ(h.length, head.size()) << "the pipelined next request is not part of it";
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "/api/v1/history?gpu=0");
  ASSERT_EQ(h.hosts.size(), 1u);
  EXPECT_EQ(h.hosts[0], "localhost%00.evil") << "the raw value, not a percent-decoded one";
  EXPECT_FALSE(h.declares_body);
  EXPECT_TRUE(ScanWhole("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n").declares_body);
  EXPECT_TRUE(ScanWhole("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").declares_body);
  EXPECT_EQ(ScanWhole("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").hosts.size(), 2u);
}

TEST(WebRequestHead, AHeadTrickledAByteAtATimeIsJudgedTheSame) {
  const std::string head = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9470\r\n\r\n";
  HeadScanner scanner;
  std::string so_far;
  for (std::size_t i = 0; i + 1 < head.size(); ++i) {
    so_far += head[i];
    ASSERT_EQ(scanner.Scan(so_far).state, HeadState::kIncomplete) << i;
  }
  so_far += head.back();
  EXPECT_EQ(scanner.Scan(so_far).state, HeadState::kComplete);
}

TEST(WebRequestHead, HeaderFloodIsBoundedInLinesAndBytesBeforeItEnds) {
  // Issue 23: 1.5 GB of headers were read and kept. Here the verdict comes at the bound, before any blank line.
  HeadScanner lines;
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 64; ++i) many += "X: y\r\n";
  EXPECT_EQ(lines.Scan(many).state, HeadState::kIncomplete) << "64 header lines are allowed";
  many += "X: y\r\n";
  EXPECT_EQ(lines.Scan(many).state, HeadState::kTooLarge);
  std::string big = "GET / HTTP/1.1\r\nX: " + std::string(16400, 'a');
  EXPECT_EQ(ScanWhole(big).state, HeadState::kTooLarge);
  EXPECT_EQ(ScanWhole("GET /" + std::string(9000, 'a')).state, HeadState::kTooLong) << "a request line over 8 KiB";
  EXPECT_EQ(ScanWhole("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n").state, HeadState::kTooLong);
}

TEST(WebRequestHead, MalformedHeadsAreRefused) {
  for (const std::string bad : {"GET / HTTP/1.1\nHost: a\n\n", "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
                                "GET / HTTP/2.0\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n",
                                "get / HTTP/1.1\r\n\r\n", "GET /\x80 HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: a\r\n\r\n",
                                "\r\n\r\n"})
    EXPECT_EQ(ScanWhole(bad).state, HeadState::kMalformed) << bad;
  const std::string nul_host = "GET / HTTP/1.1\r\nHost: localhost\0.evil\r\n\r\n"s;
  EXPECT_EQ(ScanWhole(nul_host).state, HeadState::kMalformed);
}

TEST(WebRequestHead, QueryParametersMustDecodeToText) {
  EXPECT_TRUE(CheckTarget("/api/v1/history?gpu=GPU-abc&since=1h"));
  EXPECT_TRUE(CheckTarget("/api/v1/report?user=j%C3%BCrgen&by=user+name"));
  for (const char* bad : {"/api/v1/history?gpu=GPU-%00%ff", "/api/v1/history?gpu=%ff", "/api/v1/history?gpu=%0a",
                          "/api/v1/history?gpu=%zz", "/api/v1/history?gpu=%u0041", "/api/v1/history?gpu=%4", "/metrics%00",
                          "/api/v1/history?%00=1", "/api/v1/history?gpu=%ed%a0%80"}) {
    Status s = CheckTarget(bad);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().kind, ErrorKind::kInvalidArgument);
    EXPECT_EQ(s.error().message.find('\n'), std::string::npos);
  }
  EXPECT_EQ(CheckTarget("/api/v1/history?gpu=GPU-%00%ff").error().message,
            "'gpu=GPU-%00%ff': percent-encoded bytes must decode to UTF-8 text without control characters");
  EXPECT_EQ(TargetPath("/metrics?x=1"), "/metrics");
}

}  // namespace
}  // namespace gpulane::web
