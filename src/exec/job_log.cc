#include "exec/job_log.h"

#include <fmt/format.h>

#include "os/user_file.h"

namespace gpulane::exec {

Status AppendWarningToLog(const std::string& path, std::optional<std::uint32_t> uid, std::optional<std::uint32_t> gid,
                          const std::string& line) {
  return AppendLineToLog(path, uid, gid, fmt::format("gpulane: warning: {}", line));
}

Status AppendLineToLog(const std::string& path, std::optional<std::uint32_t> uid, std::optional<std::uint32_t> gid,
                       const std::string& line) {
  if (path.empty()) return MakeError(ErrorKind::kIo, "the job has no log file");
  // The job's user's rights, its own regular file only (os/user_file.h).
  const std::optional<os::FileUser> as = uid && gid ? os::ActingFor(*uid, *gid) : std::nullopt;
  Status appended = os::AppendAsUser(path, as, uid, line + "\n");
  if (!appended.ok()) return MakeError(ErrorKind::kIo, appended.error().message);
  return Status::Ok();
}

}  // namespace gpulane::exec
