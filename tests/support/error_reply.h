#pragma once
// A daemon's error reply as a user would check it, for the in-process and the binary daemon tests
// alike: refused with the code named, in one short line that names the problem.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace gpulane::test {

/// `reply` is `{"ok": false, "code": code, "error": ...}` with an error of one line under 400 bytes
/// that contains `part`.
inline ::testing::AssertionResult IsErrorReply(const nlohmann::json& reply, const std::string& code,
                                               const std::string& part) {
  const std::string error = reply.value("error", "");
  if (reply.value("ok", true) == false && reply.value("code", "") == code && error.find(part) != std::string::npos &&
      error.find('\n') == std::string::npos && error.size() < 400)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected one short " << code << " line containing '" << part << "', got "
                                       << reply.dump().substr(0, 600);
}

/// The same for a reply that may be missing (none: a failure saying so).
inline ::testing::AssertionResult IsErrorReply(const std::optional<nlohmann::json>& reply, const std::string& code,
                                               const std::string& part) {
  if (!reply) return ::testing::AssertionFailure() << "no reply";
  if (!reply->is_object()) return ::testing::AssertionFailure() << "not an object: " << reply->dump().substr(0, 600);
  return IsErrorReply(*reply, code, part);
}

/// Seconds on the monotonic clock: how long a request took, as its sender sees it.
inline double MonotonicNowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace gpulane::test
