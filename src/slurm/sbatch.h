#pragma once
// `gpulane submit --cluster slurm`: a gpulane request translated into sbatch's argv and the batch
// script it runs. Pure functions of plain values (docs/slurm.md, "Submitting to Slurm"):
//   -g N                  --gres=gpu:N (or --gpus=N with [slurm] gpus_option = "gpus"); -g 0: none
//   --mem SIZE (-g 1)     --gres=shard:K, K = ceil(SIZE / [slurm] shard_memory), only when the
//                         cluster has shards (else refused)
//   --time-limit D        --time=MINUTES (rounded up)      --name N      --job-name=N
//   --after / --after-any --dependency=afterok:ID:ID,afterany:ID (Slurm ids)
//   --array I             --array=I          -o / -e       --output / --error (%j %a %A kept)
//   --partition P         --partition=P      --priority -N --nice=N (lower only)
//   --hold                --hold
//   always                --export=ALL --chdir=CWD --parsable
#include <optional>
#include <string>
#include <vector>

#include "sched/request.h"
#include "util/result.h"

namespace gpulane::slurm {

/// What the cluster offers that a translation depends on (asked once per submit: sinfo -o %G).
struct ClusterFeatures {
  bool has_shards = false;  ///< some node has a "shard" gres
};

/// [slurm] settings of the config (docs/config.md).
struct SlurmSettings {
  bool gpus_option = false;                          ///< gpus_option = "gpus": --gpus=N, else --gres=gpu:N
  std::uint64_t shard_memory_bytes = 10ull << 30;    ///< shard_memory: GPU memory one shard stands for
};

/// One submission, as gpulane's options gave it (ids already Slurm's).
struct SlurmSubmission {
  sched::Request request;                 ///< count, mem_bytes, time_limit_s, priority, partition (raw name)
  std::string name;                       ///< --job-name ("" = the command's name)
  std::vector<std::string> after_ok;      ///< Slurm job ids ("12", "12_3")
  std::vector<std::string> after_any;
  std::string array;                      ///< --array's indices, as given ("0-9:2")
  std::string output_path, error_path;    ///< -o/-e patterns ("" = Slurm's default, made explicit)
  std::string cwd;                        ///< the submitting directory (--chdir)
  std::string script_path;                ///< the batch script, written by the caller
  bool hold = false;                      ///< --hold: queued held (scontrol release starts it)
};

/// sbatch's argv ("sbatch", options..., script). Errors: kInvalidArgument naming a gpulane option
/// Slurm cannot honour and the fix (--gpus, --min-free, --max-util, --mig, --share-foreign,
/// --order, a positive --priority, --mem without shards or with more than one GPU).
Result<std::vector<std::string>> SbatchArgv(const SlurmSubmission& s, const ClusterFeatures& features,
                                            const SlurmSettings& settings);

/// sbatch's --time value: whole minutes, rounded up, at least 1 ("90" for 1h30m).
std::string SlurmMinutes(double seconds);

/// Whether `sinfo -h -o %G` output (one gres list per line: "gpu:2,shard:8(S:0)") names a shard.
bool HasShards(const std::string& sinfo_gres_output);

/// What the batch script runs.
struct BatchScript {
  std::string gpulane_path;            ///< the absolute path of the gpulane binary (/proc/self/exe)
  std::vector<std::string> run_args;   ///< gpulane run's options ("-g", "2"), before "--"
  std::vector<std::string> argv;       ///< the user's command
  std::string exit_code_dir;           ///< where the script writes <job id>'s exit code
};

/// The script's text (/bin/sh): sets CUDA_DEVICE_ORDER=PCI_BUS_ID, runs `gpulane run ARGS --
/// ARGV` with every word single-quoted (util/shell_words.h QuoteForShell, never concatenated
/// unquoted), writes the exit code to EXIT_DIR/<SLURM_JOB_ID, or ARRAYID_TASK> (renamed into place)
/// and exits with it. A stale file of a requeued job is removed first; when Slurm stops the job
/// (SIGTERM: scancel, its time limit) none is written, so Slurm's state (CANCELLED, TIMEOUT) tells.
std::string BatchScriptText(const BatchScript& script);

/// gpulane run's options inside the allocation for a request: -g N, and --mem for shares.
std::vector<std::string> RunArgsFor(const sched::Request& request);

}  // namespace gpulane::slurm
