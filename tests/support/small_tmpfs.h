#pragma once
// A small tmpfs of its own (a full disk for a test), root only.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpulane::test {

// A small tmpfs mounted on `path` for the test's life (root only): its own full disk. Unmounted
// lazily at the end, before the folder is removed.
class SmallTmpfs {
 public:
  explicit SmallTmpfs(const std::filesystem::path& path, const std::string& size = "8m") : path_(path) {
    std::filesystem::create_directories(path);
    const std::string options = "size=" + size + ",mode=0700";
    if (mount("tmpfs", path.c_str(), "tmpfs", 0, options.c_str()) == 0) mounted_ = true;
    else why_ = std::strerror(errno);
  }
  ~SmallTmpfs() {
    if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  // Writes a file in it until the file system has no room left (ENOSPC); Free removes it.
  void Fill() {
    std::ofstream out(path_ / ".filler", std::ios::binary);
    const std::string chunk(4096, '\0');
    for (int i = 0; i < 1'000'000 && out.write(chunk.data(), chunk.size()) && out.flush(); ++i) {
    }
    out.close();
    for (int i = 0; i < 4096; ++i) {  // the last partial page, 512 bytes at a time
      std::ofstream tail(path_ / ".filler", std::ios::binary | std::ios::app);
      if (!(tail.write(chunk.data(), 512) && tail.flush())) break;
    }
  }
  void Free() { std::filesystem::remove(path_ / ".filler"); }

 private:
  std::filesystem::path path_;
  bool mounted_ = false;
  std::string why_;
};

}  // namespace gpulane::test
