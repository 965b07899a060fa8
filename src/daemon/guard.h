#pragma once
// No exception ends the daemon: each step of its loop and each request runs guarded, so that an
// unexpected one (a nlohmann::json type error on a damaged file, std::bad_alloc,
// std::system_error) is logged, the request that caused it gets an error reply, and the daemon
// goes on serving everyone else.
#include <optional>
#include <string>
#include <string_view>

#include "daemon/job_table.h"

namespace gpulane::daemon {

/// Logs "unexpected error while <what>: <error>; going on" through `log` (swallowing anything
/// the log itself throws) and returns `error` as text ("" when even that cannot be allocated).
std::string NoteUnexpected(std::string_view what, const char* error, const LogSink& log) noexcept;

/// Runs `step()`. Returns nullopt when it returned, or the text of the exception it threw (after
/// logging it with NoteUnexpected); never throws.
template <typename Step>
std::optional<std::string> RunGuarded(std::string_view what, Step&& step, const LogSink& log) noexcept {
  try {
    step();
    return std::nullopt;
  } catch (const std::exception& e) {
    return NoteUnexpected(what, e.what(), log);
  } catch (...) {
    return NoteUnexpected(what, "an exception of unknown type", log);
  }
}

}  // namespace gpulane::daemon
