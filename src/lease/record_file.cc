#include "lease/record_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace gpulane::lease {

bool ReadAll(int fd, std::string* out) {
  char buf[8192];
  out->clear();
  while (true) {
    ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(out->size()));
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<std::size_t>(n));
    if (out->size() > kMaxRecordBytes) return false;
  }
}

std::string ReadProcLocks() {
  std::string text;
  int fd = open("/proc/locks", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[16384];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) text.append(buf, static_cast<std::size_t>(n));
  close(fd);
  return text;
}

bool ContentUid(const nlohmann::json& j, std::optional<std::uint32_t>* uid) {
  auto it = j.find("uid");
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number_unsigned() || it->get<std::uint64_t>() > UINT32_MAX) return false;
  *uid = it->get<std::uint32_t>();
  return true;
}

std::uint64_t CtimeNs(const struct stat& st) {
  return static_cast<std::uint64_t>(st.st_ctim.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(st.st_ctim.tv_nsec);
}

RecordFile ReadRecordFile(int dir_fd, const std::string& name, uid_t me, const std::function<pid_t(const FileKey&)>& holder_of) {
  RecordFile out;
  if (fstatat(dir_fd, name.c_str(), &out.st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISLNK(out.st.st_mode)) return out;
  const int f = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (f < 0) {
    // Not this user's to open (mode 0, a socket): live while /proc/locks names the holder of its lock.
    out.unreadable = fmt::format("cannot be opened: {}", std::strerror(errno));
    out.live = holder_of({static_cast<std::uint64_t>(out.st.st_dev), static_cast<std::uint64_t>(out.st.st_ino)}) > 0;
    return out;
  }
  if (fstat(f, &out.st) != 0) {
    close(f);
    return out;
  }
  if (flock(f, LOCK_SH | LOCK_NB) == 0) {  // nobody holds it: stale
    if (S_ISREG(out.st.st_mode) && (out.st.st_uid == me || me == 0)) unlinkat(dir_fd, name.c_str(), 0);
    close(f);
    return out;
  }
  out.live = true;
  if (!S_ISREG(out.st.st_mode)) out.unreadable = "not a regular file";
  else if (static_cast<std::uint64_t>(out.st.st_size) > kMaxRecordBytes) out.unreadable = "larger than 1 MiB";
  else if (!ReadAll(f, &out.bytes)) out.unreadable = out.bytes.size() > kMaxRecordBytes ? "larger than 1 MiB" : "cannot be read";
  else out.complete = true;
  close(f);
  return out;
}

LeaseRecord LeaseOf(const RecordFile& file, const FileFacts& facts) {
  std::string why = file.unreadable;
  LeaseRecord r;
  std::optional<std::uint32_t> uid;
  if (why.empty()) {
    const auto j = nlohmann::json::parse(file.bytes, nullptr, false);
    if (j.is_discarded()) why = "not JSON";
    else if (!FromJson(j, &r) || !ContentUid(j, &uid)) why = "fields missing or of the wrong type";
    else if (!TrustLease(r, uid, facts)) why = fmt::format("names uid {}, not its owner", *uid);
    else return r;
  }
  r = UnreadableLease(std::move(why), file.bytes, file.complete);
  r.started_s = static_cast<double>(facts.ctime_ns) / 1e9;  // its file's last change: for fair share, not from the epoch
  TrustLease(r, std::nullopt, facts);
  return r;
}

TicketRecord TicketOf(const RecordFile& file, const FileFacts& facts) {
  std::string why = file.unreadable;
  TicketRecord t;
  if (why.empty()) {
    const auto j = nlohmann::json::parse(file.bytes, nullptr, false);
    if (j.is_discarded()) {
      why = "not JSON";
    } else if (!FromJson(j, &t)) {
      why = "fields missing or of the wrong type";
    } else {
      const auto& request = j.at("request");
      const bool names_uid = request.contains("uid") && !request["uid"].is_null();
      const std::uint32_t named = t.request.uid;
      if (TrustTicket(t, names_uid ? std::optional(named) : std::nullopt, facts)) return t;
      why = fmt::format("names uid {}, not its owner", named);
    }
  }
  t = UnreadableTicket(std::move(why), file.bytes, file.complete);
  t.seq = std::min(facts.ctime_ns, kMaxTicketSeq);  // not before the file existed, whoever's it is
  t.request.submit_time_s = static_cast<double>(facts.ctime_ns) / 1e9;
  TrustTicket(t, std::nullopt, facts);
  return t;
}

}  // namespace gpulane::lease
