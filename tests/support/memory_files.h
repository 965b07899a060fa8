#pragma once
// Files kept in memory (os/file_system.h) for tests of code that reads and writes its state through
// os::Env's files: nothing touches the disk, and a test plants what it wants there (a symlink, an
// empty file) by filling `files`, and says which files a process holds locked in `locked`.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "os/file_system.h"

namespace gpulane::test {

class MemoryFiles final : public os::FileSystem {
 public:
  struct Entry {
    os::FileInfo::Kind kind = os::FileInfo::Kind::kRegular;
    std::string data;  ///< a regular file's bytes (a symlink's: its target, never followed here)
  };
  std::map<std::string, Entry> files;  ///< by path, exactly as the code names it
  std::set<std::string> locked;        ///< paths some process holds an exclusive flock on

  Result<std::optional<os::FileInfo>> Stat(const std::string& path, os::Links links) override {
    auto it = files.find(path);
    if (it == files.end()) return std::optional<os::FileInfo>();
    if (it->second.kind == os::FileInfo::Kind::kSymlink && links == os::Links::kFollow)
      return Stat(it->second.data, links);
    return std::optional<os::FileInfo>(os::FileInfo{it->second.kind, it->second.data.size()});
  }
  Result<std::string> ReadFile(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end() || it->second.kind != os::FileInfo::Kind::kRegular)
      return MakeError(ErrorKind::kIo, "cannot read " + path + ": not a regular file in memory");
    return it->second.data;
  }
  Status WriteFileDurably(const std::string& path, std::string_view data, mode_t) override {
    files[path] = Entry{os::FileInfo::Kind::kRegular, std::string(data)};
    return Status::Ok();
  }
  Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) override {
    return WriteFileDurably(path, data, mode);
  }
  Status RemoveFile(const std::string& path) override {
    files.erase(path);
    return Status::Ok();
  }
  /// A folder is there when it is an entry of kind kDirectory or holds a file directly (files in
  /// folders below it are not listed).
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    const std::string prefix = dir + "/";
    std::vector<std::string> names;
    for (auto it = files.lower_bound(prefix); it != files.end() && it->first.starts_with(prefix); ++it)
      if (it->first.find('/', prefix.size()) == std::string::npos) names.push_back(it->first.substr(prefix.size()));
    auto folder = files.find(dir);
    const bool is_folder = folder != files.end() && folder->second.kind == os::FileInfo::Kind::kDirectory;
    if (names.empty() && !is_folder) return MakeError(ErrorKind::kIo, "cannot list " + dir + ": no folder in memory");
    return names;
  }
  bool LockedExclusively(const std::string& path) override { return files.count(path) > 0 && locked.count(path) > 0; }
};

}  // namespace gpulane::test
