#include "exec/command_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "util/strings.h"

namespace gpulane::exec {
namespace {

// What one candidate path is: absent, an executable regular file, or there but not executable.
enum class Candidate { kAbsent, kExecutable, kNotExecutable };

Candidate Examine(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Candidate::kAbsent;
  if (S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0) return Candidate::kExecutable;
  return Candidate::kNotExecutable;
}

// `path` from `cwd` when relative.
std::string FromDir(const std::string& cwd, const std::string& path) {
  return path.empty() || path.front() == '/' || cwd.empty() ? path : cwd + "/" + path;
}

}  // namespace

std::optional<CommandProblem> CheckCommand(const std::string& argv0, const std::vector<std::string>& env,
                                           const std::string& cwd) {
  if (argv0.empty()) return CommandProblem{127, "cannot run '': the command's name is empty"};
  if (argv0.find('/') != std::string::npos) {
    switch (Examine(FromDir(cwd, argv0))) {
      case Candidate::kExecutable: return std::nullopt;
      case Candidate::kAbsent:
        return CommandProblem{127, fmt::format("cannot run '{}': no such file{}", argv0,
                                               argv0.front() == '/' ? "" : fmt::format(" (in {})", cwd))};
      case Candidate::kNotExecutable:
        return CommandProblem{126, fmt::format("cannot run '{}': not an executable file (a directory, or no "
                                               "execute permission: chmod +x, or name its interpreter first)",
                                               argv0)};
    }
  }
  std::string path = "/usr/local/bin:/usr/bin:/bin";  // as the job runner's lookup without PATH
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  std::string found_unusable;
  for (const std::string& dir : Split(path, ':')) {
    const std::string candidate = FromDir(cwd, (dir.empty() ? "." : dir) + "/" + argv0);
    const Candidate c = Examine(candidate);
    if (c == Candidate::kExecutable) return std::nullopt;
    if (c == Candidate::kNotExecutable && found_unusable.empty()) found_unusable = candidate;
  }
  if (!found_unusable.empty())
    return CommandProblem{126, fmt::format("cannot run '{}': {} is not an executable file", argv0, found_unusable)};
  const std::string shown = path.size() > 300 ? path.substr(0, 300) + "..." : path;
  return CommandProblem{127, fmt::format("cannot run '{}': not found in PATH ({})", argv0, shown)};
}

}  // namespace gpulane::exec
