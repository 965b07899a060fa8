#include "slurm/sbatch.h"

#include <cmath>
#include <fmt/format.h>

#include "util/shell_words.h"
#include "util/units.h"

namespace gpulane::slurm {
namespace {

Error Refuse(std::string message) { return MakeError(ErrorKind::kInvalidArgument, std::move(message)); }

// The gpulane options that choose GPUs on one machine: Slurm chooses the node and its GPUs.
Status CheckTranslatable(const sched::Request& r) {
  auto refuse = [](const char* option) {
    return Refuse(fmt::format("{} chooses GPUs on one machine and has no Slurm equivalent: leave it out with "
                              "--cluster slurm (Slurm picks the node and its GPUs)",
                              option));
  };
  if (!r.gpu_list.empty()) return refuse("--gpus");
  if (r.min_free_bytes) return refuse("--min-free");
  if (r.max_util_pct) return refuse("--max-util");
  if (r.share_foreign) return refuse("--share-foreign");
  if (r.order) return refuse("--order");
  if (!r.mig_profile.empty()) return refuse("--mig");
  if (r.preemptible != sched::Preemptible::kNo) return refuse("--preemptible");
  if (r.priority > 0)
    return Refuse(fmt::format("--priority {}: on Slurm only its operators may raise a job's priority; give 0 or a "
                              "negative number (--priority -N becomes sbatch --nice=N)",
                              r.priority));
  return Status::Ok();
}

// --gres=shard:K for --mem SIZE (one GPU), or the GPU count.
Result<std::string> GpuOption(const sched::Request& r, const ClusterFeatures& features, const SlurmSettings& settings) {
  if (r.mem_bytes) {
    if (!features.has_shards)
      return Refuse(fmt::format("--mem {}: this Slurm cluster has no GPU shards (sinfo -o %G names no shard gres), so "
                                "GPUs cannot be shared: ask for whole GPUs with -g N, or ask the admins to configure "
                                "shards",
                                FormatBytes(*r.mem_bytes)));
    if (r.count != 1)
      return Refuse(fmt::format("-g {} with --mem: Slurm's shards share one GPU; give -g 1 with --mem", r.count));
    const std::uint64_t per = settings.shard_memory_bytes ? settings.shard_memory_bytes : 1;
    const std::uint64_t shards = (*r.mem_bytes + per - 1) / per;
    return fmt::format("--gres=shard:{}", shards == 0 ? 1 : shards);
  }
  if (r.count == 0) return std::string();
  return settings.gpus_option ? fmt::format("--gpus={}", r.count) : fmt::format("--gres=gpu:{}", r.count);
}

std::string Dependency(const std::vector<std::string>& ok, const std::vector<std::string>& any) {
  std::string out;
  auto add = [&](const char* kind, const std::vector<std::string>& ids) {
    if (ids.empty()) return;
    out += (out.empty() ? "" : ",") + std::string(kind);
    for (const auto& id : ids) out += ":" + id;
  };
  add("afterok", ok);
  add("afterany", any);
  return out;
}

}  // namespace

std::string SlurmMinutes(double seconds) {
  const double minutes = std::ceil(seconds / 60.0);
  return fmt::format("{}", static_cast<long long>(minutes < 1 ? 1 : minutes));
}

bool HasShards(const std::string& sinfo_gres_output) {
  std::size_t at = 0;
  while ((at = sinfo_gres_output.find("shard", at)) != std::string::npos) {
    const bool starts = at == 0 || sinfo_gres_output[at - 1] == ',' || sinfo_gres_output[at - 1] == '\n';
    const std::size_t end = at + 5;
    if (starts && end < sinfo_gres_output.size() && sinfo_gres_output[end] == ':') return true;
    at = end;
  }
  return false;
}

Result<std::vector<std::string>> SbatchArgv(const SlurmSubmission& s, const ClusterFeatures& features,
                                            const SlurmSettings& settings) {
  if (Status ok = CheckTranslatable(s.request); !ok.ok()) return ok.error();
  auto gpus = GpuOption(s.request, features, settings);
  if (!gpus) return gpus.error();
  std::vector<std::string> argv = {"sbatch", "--parsable", "--export=ALL", "--chdir=" + s.cwd};
  if (!gpus->empty()) argv.push_back(*gpus);
  if (!s.name.empty()) argv.push_back("--job-name=" + s.name);
  if (s.request.time_limit_s) argv.push_back("--time=" + SlurmMinutes(*s.request.time_limit_s));
  if (!s.request.partition.empty()) argv.push_back("--partition=" + s.request.partition);
  if (s.request.priority < 0) argv.push_back(fmt::format("--nice={}", -static_cast<long long>(s.request.priority)));
  if (const std::string dep = Dependency(s.after_ok, s.after_any); !dep.empty()) argv.push_back("--dependency=" + dep);
  if (!s.array.empty()) argv.push_back("--array=" + s.array);
  if (s.hold) argv.push_back("--hold");
  const std::string output = !s.output_path.empty() ? s.output_path : s.array.empty() ? "slurm-%j.out" : "slurm-%A_%a.out";
  argv.push_back("--output=" + output);
  if (!s.error_path.empty()) argv.push_back("--error=" + s.error_path);
  argv.push_back(s.script_path);
  return argv;
}

std::vector<std::string> RunArgsFor(const sched::Request& request) {
  std::vector<std::string> args = {"-g", std::to_string(request.count)};
  if (request.mem_bytes) {
    args.push_back("--mem");
    args.push_back(std::to_string(*request.mem_bytes) + "B");
  }
  return args;
}

std::string BatchScriptText(const BatchScript& script) {
  std::string command = QuoteForShell(script.gpulane_path) + " run";
  for (const auto& a : script.run_args) command += " " + QuoteForShell(a);
  command += " --";
  for (const auto& a : script.argv) command += " " + QuoteForShell(a);
  const std::string dir = QuoteForShell(script.exit_code_dir);
  return fmt::format(
      "#!/bin/sh\n"
      "# Written by gpulane submit --cluster slurm: the job's command under gpulane run inside the allocation.\n"
      "export CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
      "id=$SLURM_JOB_ID\n"
      "[ -n \"$SLURM_ARRAY_JOB_ID\" ] && [ -n \"$SLURM_ARRAY_TASK_ID\" ] && id=\"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}\"\n"
      "rm -f {}/\"$id\"\n"
      "# Stopped by Slurm (scancel, the time limit): no exit code is written; Slurm's state tells.\n"
      "trap 'exit 143' TERM\n"
      "trap 'exit 130' INT\n"
      "{}\n"
      "rc=$?\n"
      "mkdir -p {} && printf '%s\\n' \"$rc\" > {}/\"$id.tmp\" && mv -f {}/\"$id.tmp\" {}/\"$id\"\n"
      "exit \"$rc\"\n",
      dir, command, dir, dir, dir, dir);
}

}  // namespace gpulane::slurm
