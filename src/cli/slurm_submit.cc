// `submit --cluster slurm` (cli/slurm_jobs.h): the parsed request becomes an sbatch argv and a
// batch script that runs the command under `gpulane run` (slurm/sbatch.h); the job is registered
// for queue/show/wait (slurm/job_registry.h).
#include <unistd.h>

#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <tuple>

#include "cli/common.h"
#include "cli/slurm_jobs.h"
#include "cli/slurm_side.h"
#include "slurm/job_state.h"
#include "slurm/sbatch.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/terminal_text.h"

namespace gpulane::cli {
namespace {

// --after/--after-any's comma lists into Slurm ids. Errors: kInvalidArgument for a word that is
// not slurm:ID (a job on Slurm can only wait for Slurm jobs) or a malformed id.
Status ParseDependencies(const SlurmSubmitArgs& a, slurm::SlurmSubmission* s) {
  for (auto [text, target, option] : {std::tuple{&a.after, &s->after_ok, "--after"}, std::tuple{&a.after_any, &s->after_any, "--after-any"}}) {
    std::size_t start = 0;
    while (!text->empty() && start <= text->size()) {
      const std::size_t comma = text->find(',', start);
      const std::string word = text->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      std::string id;
      if (!slurm::IsSlurmId(word, &id))
        return MakeError(ErrorKind::kInvalidArgument,
                         fmt::format("{} {}: a job on --cluster slurm can only wait for Slurm jobs: give their "
                                     "ids as slurm:1234",
                                     option, EscapeForTerminal(word)));
      if (Status ok = slurm::CheckSlurmId(id); !ok.ok()) return ok;
      target->push_back(id);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return Status::Ok();
}

// The cluster's shards, asked with sinfo once, only when --mem needs them. Errors: kUnavailable
// when sinfo fails.
Result<slurm::ClusterFeatures> FeaturesFor(const sched::Request& request, slurm::CommandRunner& runner) {
  slurm::ClusterFeatures features;
  if (!request.mem_bytes) return features;
  const std::vector<std::string> sinfo = {"sinfo", "-h", "-o", "%G"};
  auto gres = runner.Run(sinfo);
  if (!gres) return gres.error();
  if (gres->exit_code != 0) return MakeError(ErrorKind::kUnavailable, slurm::DescribeFailure(sinfo, *gres));
  features.has_shards = slurm::HasShards(gres->stdout_text);
  return features;
}

// This gpulane binary's path, for the batch script's `gpulane run`. Errors: kIo.
Result<std::string> SelfPath() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return MakeError(ErrorKind::kIo, "cannot read /proc/self/exe (the gpulane binary's path)");
  return std::string(self, static_cast<std::size_t>(n));
}

// What the registry keeps of a submission sbatch accepted as `id`.
slurm::RegisteredJob RegistrationOf(const std::string& id, const slurm::SlurmSubmission& s,
                                    const std::vector<std::string>& argv, const std::vector<std::string>& command) {
  slurm::RegisteredJob job;
  job.slurm_id = id;
  job.name = s.name;
  job.argv = command;
  job.cwd = s.cwd;
  for (const auto& word : argv) {
    if (word.rfind("--output=", 0) == 0) job.output_pattern = word.substr(9);
    if (word.rfind("--error=", 0) == 0) job.error_pattern = word.substr(8);
  }
  job.array = !s.array.empty();
  job.gpu_count = s.request.count;
  job.submit_time_s = s.request.submit_time_s;
  return job;
}

}  // namespace

int SubmitToSlurm(const SlurmSubmitArgs& a) {
  auto side = OpenSlurmSide(/*create=*/true);
  if (!side) return Fail(side.error());
  auto config = LoadConfig();
  if (!config) return Fail(config.error());
  slurm::SlurmSubmission s;
  s.request = a.request;
  s.name = a.name.empty() ? a.command.front().substr(a.command.front().rfind('/') + 1) : a.name;
  s.array = a.array;
  s.output_path = a.output;
  s.error_path = a.error;
  s.hold = a.hold;
  if (Status ok = ParseDependencies(a, &s); !ok.ok()) return Fail(ok.error());
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return Fail(MakeError(ErrorKind::kIo, "cannot read the current directory"));
  s.cwd = cwd;
  auto features = FeaturesFor(s.request, (*side)->runner);
  if (!features) return Fail(features.error());
  slurm::SlurmSettings settings;
  settings.gpus_option = config->slurm_gpus_option == "gpus";
  settings.shard_memory_bytes = config->slurm_shard_memory_bytes;
  const std::string dir = (*side)->registry.Dir();
  if (Status made = slurm::MakeDirs(dir); !made.ok()) return Fail(made.error());
  s.script_path = fmt::format("{}/submit-{}.sh", dir, getpid());
  auto argv = slurm::SbatchArgv(s, *features, settings);
  if (!argv) return Fail(argv.error());
  auto self = SelfPath();
  if (!self) return Fail(self.error());
  const std::string script =
      slurm::BatchScriptText({*self, slurm::RunArgsFor(s.request), a.command, (*side)->registry.ExitCodeDir()});
  {
    std::ofstream out(s.script_path, std::ios::trunc);
    out << script;
    if (!out) return Fail(MakeError(ErrorKind::kIo, fmt::format("cannot write the batch script {}", s.script_path)));
  }
  auto ran = (*side)->runner.Run(*argv);
  std::remove(s.script_path.c_str());  // sbatch keeps its own copy
  if (!ran) return Fail(ran.error());
  if (ran->exit_code != 0) return Fail(MakeError(ErrorKind::kUnavailable, slurm::DescribeFailure(*argv, *ran)));
  const std::string id = ran->stdout_text.substr(0, ran->stdout_text.find_first_of(";\n"));  // --parsable: "id[;cluster]"
  if (!slurm::CheckSlurmId(id).ok())
    return Fail(MakeError(ErrorKind::kInternal, fmt::format("sbatch printed no job id: {}", EscapeForTerminal(ran->stdout_text))));
  if (Status added = (*side)->registry.Add(RegistrationOf(id, s, *argv, a.command)); !added.ok())
    Warn(fmt::format("submitted as slurm:{}, but cannot remember it for queue/show/wait: {}", id, added.error().message));
  fmt::print("{}{}\n", slurm::kIdPrefix, id);
  return kExitOk;
}

}  // namespace gpulane::cli
