#include "slurm/job_registry.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

namespace gpulane::slurm {

bool IsSlurmId(const std::string& word, std::string* slurm_id) {
  if (word.rfind(kIdPrefix, 0) != 0) return false;
  if (slurm_id) *slurm_id = word.substr(std::strlen(kIdPrefix));
  return true;
}

Status CheckSlurmId(const std::string& id) {
  const std::size_t bar = id.find('_');
  const std::string job = id.substr(0, bar), task = bar == std::string::npos ? "1" : id.substr(bar + 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 12 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(job) || !digits(task))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("slurm:{}: not a Slurm job id: give slurm:1234, or slurm:1234_5 for an array task", id));
  return Status::Ok();
}

Status MakeDirs(const std::string& dir) {
  std::size_t at = 1;
  while (true) {
    at = dir.find('/', at);
    const std::string part = dir.substr(0, at);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return MakeError(ErrorKind::kIo, fmt::format("cannot create {}: {}", part, std::strerror(errno)));
    if (at == std::string::npos) return Status::Ok();
    ++at;
  }
}

JobRegistry::JobRegistry(std::string state_dir) : dir_(std::move(state_dir) + "/slurm") {}

std::string JobRegistry::ExitCodeDir() const { return dir_ + "/exit"; }

Status JobRegistry::Add(const RegisteredJob& job) const {
  if (Status made = MakeDirs(dir_); !made.ok()) return made;
  const nlohmann::json line = {{"id", job.slurm_id},      {"name", job.name},
                               {"argv", job.argv},        {"cwd", job.cwd},
                               {"output", job.output_pattern}, {"error", job.error_pattern},
                               {"array", job.array},      {"gpus", job.gpu_count},
                               {"submit_time", job.submit_time_s}};
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const std::string path = dir_ + "/jobs.jsonl";
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return MakeError(ErrorKind::kIo, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  flock(fd, LOCK_EX);
  const ssize_t n = write(fd, text.data(), text.size());
  const int saved = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    return MakeError(ErrorKind::kIo, fmt::format("cannot write {}: {}", path, std::strerror(saved)));
  return Status::Ok();
}

Result<std::vector<RegisteredJob>> JobRegistry::All() const {
  std::vector<RegisteredJob> jobs;
  std::ifstream in(dir_ + "/jobs.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("id")) continue;
    RegisteredJob job;
    job.slurm_id = j.value("id", "");
    job.name = j.value("name", "");
    job.argv = j.value("argv", std::vector<std::string>{});
    job.cwd = j.value("cwd", "");
    job.output_pattern = j.value("output", "");
    job.error_pattern = j.value("error", "");
    job.array = j.value("array", false);
    job.gpu_count = j.value("gpus", 0u);
    job.submit_time_s = j.value("submit_time", 0.0);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace gpulane::slurm
