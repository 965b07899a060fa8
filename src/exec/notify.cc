#include "exec/notify.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

#include <fmt/format.h>

namespace gpulane::exec {
namespace {

using nlohmann::json;

// argv/envp as execve takes them, built before a fork (nothing is allocated after it).
struct CArgs {
  std::vector<std::string> strings;
  std::vector<char*> pointers;
  explicit CArgs(std::vector<std::string> s) : strings(std::move(s)) {
    for (auto& x : strings) pointers.push_back(x.data());
    pointers.push_back(nullptr);
  }
  char** get() { return pointers.data(); }
};

// `name`'s path along $PATH ("" when not found), looked up before any fork.
std::string FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream in(dirs);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Writes a line to stderr with write(2) only (safe after fork).
void Say(const char* text) {
  const std::size_t n = std::strlen(text);
  (void)!write(2, text, n);
}

void SleepS(int seconds) {
  timespec t{seconds, 0};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// Runs `argv` with `envp`, `input` on its stdin; its exit status, or -1.
int RunWithInput(os::Spawner& spawner, char** argv, char** envp, const std::string& input) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  auto started = spawner.Start([&] {
    dup2(fds[0], 0);
    close(fds[0]);
    close(fds[1]);
    execve(argv[0], argv, envp);
    _exit(127);
  });
  if (!started) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  const pid_t pid = *started;
  close(fds[0]);
  for (std::size_t done = 0; done < input.size();) {
    ssize_t n = write(fds[1], input.data() + done, input.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  close(fds[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string WebhookBody(const NotifyEvent& e, const std::string& format) {
  if (format == "text") return e.message + (e.log_tail.empty() ? "" : "\n" + e.log_tail);
  // "text" is what Slack's incoming webhooks show, "content" Discord's; the rest for anything else.
  json j = {{"text", e.message}, {"content", e.message}, {"event", e.event}, {"job_id", e.job_id},
            {"name", e.name},    {"user", e.user},       {"state", e.state}, {"log_tail", e.log_tail}};
  if (e.exit_code) j["exit_code"] = *e.exit_code;
  return j.dump();
}

std::vector<std::string> CommandEnvironment(const NotifyEvent& e) {
  std::vector<std::string> env = {"GPULANE_EVENT=" + e.event,       "GPULANE_JOB_ID=" + e.job_id,
                                  "GPULANE_JOB_NAME=" + e.name,     "GPULANE_JOB_USER=" + e.user,
                                  "GPULANE_JOB_STATE=" + e.state,   "GPULANE_MESSAGE=" + e.message,
                                  "GPULANE_LOG_TAIL=" + e.log_tail};
  if (e.exit_code) env.push_back(fmt::format("GPULANE_EXIT_CODE={}", *e.exit_code));
  return env;
}

std::string LogTail(const std::string& path, std::optional<os::FileUser> as, std::optional<std::uint32_t> owner) {
  // One byte more than is kept: whether the tail starts inside a line.
  auto tail = os::ReadTailAsUser(path, as, owner, kLogTailBytes + 1);
  if (!tail) return "";
  std::string text = std::move(tail).value();
  if (text.size() > kLogTailBytes) {  // from a whole line on
    const auto nl = text.find('\n');
    text.erase(0, nl == std::string::npos ? 1 : nl + 1);
  }
  return text;
}

Status SendDetached(os::Spawner& spawner, const NotifyTarget& target, const NotifyEvent& e, std::optional<uid_t> uid, std::optional<gid_t> gid,
                    const std::vector<std::string>& env) {
  // Everything is made before the fork.
  const std::string curl = target.webhook.empty() ? "" : FindProgram("curl");
  if (!target.webhook.empty() && curl.empty()) Say("gpulane: notification: curl is not installed: the webhook is not sent\n");
  const std::string content_type = target.format == "text" ? "Content-Type: text/plain; charset=utf-8" : "Content-Type: application/json";
  CArgs curl_argv({curl, "-sS", "--fail", "--max-time", "10", "-X", "POST", "-H", content_type, "--data-binary", "@-",
                   target.webhook});
  const std::string body = WebhookBody(e, target.format);
  std::vector<std::string> full_env = env;
  for (auto& v : CommandEnvironment(e)) full_env.push_back(std::move(v));
  CArgs envp(full_env);
  CArgs sh_argv({"/bin/sh", "-c", target.command});
  std::vector<gid_t> groups(64);
  int count = static_cast<int>(groups.size());
  const bool drop = geteuid() == 0 && uid && gid && *uid != 0;
  if (drop) {
    struct passwd* pw = getpwuid(*uid);
    if (!pw || getgrouplist(pw->pw_name, *gid, groups.data(), &count) < 0) count = 1, groups[0] = *gid;
  }
  const std::string failed_webhook = fmt::format("gpulane: notification of job {}: the webhook failed 3 times; given up\n", e.job_id);
  const auto first = [&] {
    if (drop && (setgroups(static_cast<std::size_t>(count), groups.data()) != 0 || setgid(*gid) != 0 || setuid(*uid) != 0))
      _exit(1);  // never as root
  };
  const auto deliver = [&] {  // detached: nobody waits for the delivery
    const int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    if (!target.webhook.empty() && !curl.empty()) {
      bool sent = false;
      const int pauses_s[] = {2, 10};
      for (int attempt = 0; attempt < 3 && !sent; ++attempt) {
        if (attempt > 0) SleepS(pauses_s[attempt - 1]);
        sent = RunWithInput(spawner, curl_argv.get(), envp.get(), body) == 0;
      }
      if (!sent) Say(failed_webhook.c_str());
    }
    if (!target.command.empty()) RunWithInput(spawner, sh_argv.get(), envp.get(), "");
    _exit(0);
  };
  if (Status started = spawner.StartDetached(first, deliver); !started.ok())
    return MakeError(ErrorKind::kIo, "cannot send a notification: " + started.error().message);
  return Status::Ok();
}

}  // namespace gpulane::exec
