#pragma once
// One lease or ticket file of the lease directory, read as far as its owner and the kernel vouch
// for it (lease_dir.h's header: the threat model). Internal to lease/: LeaseDir::Read reads every
// file with these, LeaseDir::ReadLease one by name.

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lease/lease_dir.h"
#include "lease/records.h"

namespace gpulane::lease {

/// Reads a small regular file through an open descriptor (false: unreadable or over kMaxRecordBytes).
bool ReadAll(int fd, std::string* out);
/// The text of /proc/locks ("" when it cannot be read: then no lock's holder is known).
std::string ReadProcLocks();
/// The uid a lease file names ("uid"): none when absent; false when it is there but no uid at all
/// (then the file is no lease).
bool ContentUid(const nlohmann::json& j, std::optional<std::uint32_t>* uid);
/// A file's last status change, nanoseconds since the epoch.
std::uint64_t CtimeNs(const struct stat& st);

/// One *.lease or *.wait file as far as it can be read.
struct RecordFile {
  bool live = false;       ///< its lock is held: it counts (else it is ignored)
  struct stat st {};
  std::string bytes;       ///< what was read of it
  bool complete = false;   ///< `bytes` is all of it
  std::string unreadable;  ///< why it is no record gpulane can read ("": `bytes` still has to parse)
};

/// Reads the file `name` of the lease directory: a stale one (nobody holds its lock) is not live and
/// removed when its owner or root sees it; a live one that is not a regular file, too large or not
/// openable by this user is live all the same, with why it cannot be read (`holder_of` then says
/// whether someone holds its lock). A symbolic link is never live: nobody can hold a lock on the
/// link itself, and gpulane never follows one here.
RecordFile ReadRecordFile(int dir_fd, const std::string& name, uid_t me, const std::function<pid_t(const FileKey&)>& holder_of);
/// The lease a live file holds, as far as its owner vouches for it (TrustLease); an unreadable one
/// (UnreadableLease) when it is none gpulane can read.
LeaseRecord LeaseOf(const RecordFile& file, const FileFacts& facts);
/// The ticket a live file holds (TrustTicket), or an unreadable one (UnreadableTicket) in line at
/// its file's change time.
TicketRecord TicketOf(const RecordFile& file, const FileFacts& facts);

}  // namespace gpulane::lease
