#pragma once
// Files kept in memory (os/file_system.h) for tests of code that reads and writes its state through
// os::Env's files: nothing touches the disk, and a test plants what it wants there (a symlink, an
// empty file) by filling `files`.
#include <map>
#include <string>

#include "os/file_system.h"

namespace gpulane::test {

class MemoryFiles final : public os::FileSystem {
 public:
  struct Entry {
    os::FileInfo::Kind kind = os::FileInfo::Kind::kRegular;
    std::string data;  ///< a regular file's bytes (a symlink's: its target, never followed here)
  };
  std::map<std::string, Entry> files;  ///< by path, exactly as the code names it

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
};

}  // namespace gpulane::test
