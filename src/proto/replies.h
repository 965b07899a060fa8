#pragma once
// The daemon's structured replies, typed like its requests (proto/requests.h): one struct each,
// its members listed once for the encoder and the decoder (proto/codec.h). ReplyToJson adds
// {"v": 2, "ok": true}. Replies that list jobs carry job objects (store::JobToJson) and those over
// several jobs daemon::Outcome's members; they are built there.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "proto/codec.h"
#include "proto/wire.h"
#include "util/result.h"

namespace gpulane::proto {

/// `ping`: who answers, and how the loop does.
struct PingReply {
  struct Loading {  ///< while the daemon, just started, loads its unfinished jobs
    std::uint64_t loaded = 0, total = 0;
    template <typename V> void Fields(V& v) {
      v("loaded", loaded);
      v("total", total);
    }
    bool operator==(const Loading&) const = default;
  };
  std::int64_t pid = 0;
  std::string mode;        ///< "system" or "user"
  std::uint64_t gpus = 0;
  std::string socket;
  nlohmann::json web;      ///< its gpulane-web (daemon/web_child.h WebInfo)
  std::optional<Loading> loading;
  std::optional<std::uint64_t> loop_turns;  ///< with loop_stats: since the last such ping
  std::optional<double> loop_worst_turn_ms, loop_worst_tick_turn_ms;
  template <typename V> void Fields(V& v) {
    v("gpus", gpus);
    v("loading", loading);
    v("loop_turns", loop_turns);
    v("loop_worst_tick_turn_ms", loop_worst_tick_turn_ms);
    v("loop_worst_turn_ms", loop_worst_turn_ms);
    v("mode", mode);
    v("pid", pid);
    v("socket", socket);
    v("web", web);
  }
  bool operator==(const PingReply&) const = default;
};

/// `logs`: a part of a job's output.
struct LogsReply {
  nlohmann::json data;      ///< bytes (util/bytes_json.h)
  std::uint64_t offset = 0;  ///< the next part's
  bool finished = false;
  nlohmann::json path;      ///< bytes: the file; "" before the job's command opened it
  template <typename V> void Fields(V& v) {
    v("data", data);
    v("finished", finished);
    v("offset", offset);
    v("path", path);
  }
  bool operator==(const LogsReply&) const = default;
};

/// `submit`: the jobs are durable.
struct SubmitReply {
  std::vector<std::int64_t> ids;
  std::optional<std::int64_t> array_job_id;  ///< an array's
  std::optional<bool> repeated;              ///< true: the idempotency key was submitted before
  template <typename V> void Fields(V& v) {
    v("array_job_id", array_job_id);
    v("ids", ids);
    v("repeated", repeated);
  }
  bool operator==(const SubmitReply&) const = default;
};

/// {"v": 2, "ok": true, members}.
template <typename R>
nlohmann::json ReplyToJson(const R& reply) {
  nlohmann::json j = EncodeFields(reply);
  j["v"] = kVersion;
  j["ok"] = true;
  return j;
}

/// Reads a reply of type R (a client's side; `what` names it in errors). Errors: kInvalidArgument.
template <typename R>
Result<R> ReplyFromJson(const nlohmann::json& j, const char* what) {
  if (!j.is_object()) return MakeError(ErrorKind::kInvalidArgument, std::string("malformed ") + what + " reply");
  R reply;
  FieldDecoder decoder(j, what);
  reply.Fields(decoder);
  if (!decoder.error().empty()) return MakeError(ErrorKind::kInvalidArgument, decoder.error());
  return reply;
}

}  // namespace gpulane::proto
