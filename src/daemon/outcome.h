#pragma once
// What a command over several jobs did (cancel, hold, release, show, wait): the jobs it acted on,
// and a line and a code for each id it could not act on (README, "Exit codes": the first failure's
// code is the command's). Kept across turns of the loop by a cancel done in slices (cancel_slices.cc).
#include <string>

#include <nlohmann/json.hpp>

#include "proto/wire.h"
#include "store/job.h"
#include "store/job_id.h"
#include "util/result.h"

namespace gpulane::daemon {

class Outcome {
 public:
  /// Job `id` ("12_3" to people, store::JobIdText) is acted on.
  void Done(std::int64_t id, const std::string& text) {
    ids_.push_back(id);
    texts_.push_back(text);
  }
  /// The job `text` (also Done) is acted on, and the change completes once its supervisor has
  /// acted: a cancelled job that runs (SIGTERM sent), one leaving the line to be held.
  void InProgress(const std::string& text) { in_progress_.push_back(text); }
  /// The job `text` (also Done), cancelled while its supervisor waited for GPUs: it never started.
  void BeforeStart(const std::string& text) { before_start_.push_back(text); }
  void Failed(ErrorKind kind, const std::string& id, const std::string& message) {
    if (failed_.empty()) first_ = Error{kind, message};
    failed_.push_back({{"id", id}, {"error", message}, {"code", proto::KindName(kind)}});
    errors_.push_back(message);
  }
  bool failed() const { return !failed_.empty(); }
  std::size_t done() const { return ids_.size(); }
  /// Adds "failed" ({id, error, code} each) and "errors" (the lines) to a response.
  nlohmann::json& WithFailures(nlohmann::json& body) const {
    body["failed"] = failed_;
    body["errors"] = errors_;
    return body;
  }
  /// The first failure's error response, with every failure.
  nlohmann::json ErrorReply() const {
    nlohmann::json body = proto::ErrorResponse(first_.kind, first_.message);
    return WithFailures(body);
  }
  /// `done` names the field of the jobs acted on ("cancelled": ids, "cancelled_text": "12_3" ...).
  /// The error response when nothing was done.
  nlohmann::json Reply(const std::string& done) const {
    if (ids_.empty() && failed()) return ErrorReply();
    nlohmann::json body = {{"v", proto::kVersion}, {"ok", true}, {done, ids_}, {done + "_text", texts_},
                           {"in_progress_text", in_progress_}, {"before_start_text", before_start_}};
    return WithFailures(body);
  }

 private:
  nlohmann::json ids_ = nlohmann::json::array(), texts_ = nlohmann::json::array(), failed_ = nlohmann::json::array(),
                 errors_ = nlohmann::json::array();
  nlohmann::json in_progress_ = nlohmann::json::array(), before_start_ = nlohmann::json::array();
  Error first_;
};

}  // namespace gpulane::daemon
