#include "exec/job_log.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace gpulane::exec {
namespace {

// Opens with the file-system rights of uid/gid while alive (root only; a no-op otherwise).
class FsIdentity {
 public:
  FsIdentity(std::optional<std::uint32_t> uid, std::optional<std::uint32_t> gid) {
    if (geteuid() != 0 || !uid) return;
    old_gid_ = setfsgid(gid.value_or(getegid()));
    old_uid_ = setfsuid(*uid);
    active_ = true;
  }
  ~FsIdentity() {
    if (!active_) return;
    setfsuid(static_cast<uid_t>(old_uid_));
    setfsgid(static_cast<gid_t>(old_gid_));
  }

 private:
  bool active_ = false;
  int old_uid_ = 0, old_gid_ = 0;
};

}  // namespace

Status AppendWarningToLog(const std::string& path, std::optional<std::uint32_t> uid, std::optional<std::uint32_t> gid,
                          const std::string& line) {
  return AppendLineToLog(path, uid, gid, fmt::format("gpulane: warning: {}", line));
}

Status AppendLineToLog(const std::string& path, std::optional<std::uint32_t> uid, std::optional<std::uint32_t> gid,
                       const std::string& line) {
  if (path.empty()) return MakeError(ErrorKind::kIo, "the job has no log file");
  int fd = -1;
  {
    FsIdentity as_owner(uid, gid);
    fd = open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  }
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uid && st.st_uid != *uid)) {
    close(fd);
    return MakeError(ErrorKind::kIo, fmt::format("{} is not a regular file of the job's owner", path));
  }
  const std::string text = line + "\n";
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written) return MakeError(ErrorKind::kIo, fmt::format("cannot write to {}", path));
  return Status::Ok();
}

}  // namespace gpulane::exec
