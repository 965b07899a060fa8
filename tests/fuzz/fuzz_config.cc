// The config parser (util/config.cc LoadConfigFile) on a file of the fuzzer's bytes, as a user's
// ~/.config/gpulane/config.toml (untrusted) or the machine's /etc/gpulane/config.toml (trusted):
// byte 0 picks which.
// Properties: an error is one line naming the file and a line number; a file that loads leaves
// every duration finite and >= 0, and an untrusted file never changes the machine-only keys.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_check.h"
#include "util/config.h"

namespace {

const std::string& TempPath() {
  static const std::string path = [] {
    char name[] = "/tmp/gpulane-fuzz-config-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) std::abort();
    close(fd);
    return std::string(name);
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool trusted = data[0] & 1;
  const std::string& path = TempPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 1) std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);

  gpulane::Config config;
  const gpulane::Config before = config;
  gpulane::Status s = gpulane::LoadConfigFile(path, trusted, config);
  if (!s.ok()) {
    const std::string& m = s.error().message;
    FUZZ_CHECK(m.rfind(path + ":", 0) == 0, "error without the file: %s", m.c_str());
    FUZZ_CHECK(m.find('\n') == std::string::npos && m.find('\r') == std::string::npos, "error of several lines: %s",
               m.c_str());
    return 0;
  }
  for (double d : {config.kill_grace_s, config.nvml_poll_s, config.stray_check_s})
    FUZZ_CHECK(std::isfinite(d) && d >= 0, "a duration of %g accepted", d);
  if (!trusted) {
    FUZZ_CHECK(config.lease_dir == before.lease_dir && config.memory_margin_bytes == before.memory_margin_bytes &&
                   config.admin_group == before.admin_group && config.daemon_mode == before.daemon_mode &&
                   config.max_waiting_supervisors == before.max_waiting_supervisors &&
                   config.anomaly_overuse_grace_s == before.anomaly_overuse_grace_s,
               "a user's file changed a machine-only key");
  }
  return 0;
}
