#pragma once
// What every subcommand shares: opening the GPUs, reporting errors, the terminal.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/clock.h"
#include "gpu/backend.h"
#include "gpu/visible_devices.h"
#include "lease/lease_dir.h"
#include "os/env.h"
#include "util/config.h"
#include "util/notify_target.h"
#include "util/result.h"

namespace gpulane::cli {

/// Prints "gpulane: <level>: <message>" on stderr as one line, the message escaped for the terminal
/// (util/terminal_text.h: messages quote job names, paths, process names and daemon replies, which
/// other users choose). Every error and warning line of the CLI goes through here.
void PrintDiagnostic(std::string_view level, std::string_view message);
/// Prints "gpulane: error: <message>" on stderr (PrintDiagnostic) and returns the exit code for
/// the error's kind.
int Fail(const Error& error);
/// Prints "gpulane: warning: <message>" on stderr (PrintDiagnostic).
void Warn(const std::string& message);

/// The notification target of --notify EVENTS with [notify] of `config` (the user's settings over
/// the machine's). Errors: kInvalidArgument for an unknown event, or when neither notify.webhook nor
/// notify.command is set (the message says where to set them).
Result<NotifyTarget> NotifyTargetOf(const std::string& events, const Config& config);

/// The live lease of the `gpulane run` named `id` ("r1234", as status names it): one whose lock
/// that process holds; nullopt when there is none (no such run, or it has ended).
std::optional<lease::LeaseRecord> LiveRunLease(std::string_view id);
/// The error for a run's id given to a job command: kInvalidArgument saying it is a run and how to
/// stop it when LiveRunLease finds it, else kNotFound "no running gpulane run r1234".
Error RunIdError(std::string_view id);

/// The job ids of a command line ("12", "12_3", "12_[1-3,7]"; a word may hold several separated by
/// commas), checked with the one parser of the notation (store/job_id.h) and passed on as written.
/// Errors: kInvalidArgument naming the first bad id and the forms expected; a run's id, RunIdError.
Result<std::vector<std::string>> JobIdArgs(const std::vector<std::string>& words);

/// For a daemon reply to a command over several jobs (its "failed": id, error and code each):
/// prints one line per job it could not act on, as an error when the reply is one (nothing was
/// done) and as a warning otherwise. Returns the first failure's exit code, kExitOk when none.
int ReportFailures(const nlohmann::json& reply);

/// The GPU source for commands: the running daemon's snapshots, else NVML itself (library from
/// $GPULANE_NVML_LIBRARY or libnvidia-ml.so.1 through `env`'s GPUs; see proto::SnapshotSource).
/// Errors surface at the first Read. `env` (main()'s) outlives it.
Result<std::unique_ptr<GpuBackend>> OpenBackend(const os::Env& env);

/// Reads a snapshot and fills in process owners and command lines from /proc.
Result<GpuSnapshot> ReadAnnotated(GpuBackend& backend, const ReadOptions& options = {});

/// The value of environment variable `name`, if set.
std::optional<std::string> EnvironmentValue(const char* name);

/// The inherited CUDA_VISIBLE_DEVICES, if set.
std::optional<std::string> InheritedVisibleDevices();

/// This process's inherited GPU allocation: CUDA_VISIBLE_DEVICES and, inside a Slurm job on its
/// node, SLURM_STEP_GPUS/SLURM_JOB_GPUS (gpu/visible_devices.h InheritedGpusFrom).
InheritedGpus InheritedAllocation();

/// Parses the inherited CUDA_VISIBLE_DEVICES against `snapshot`, warning on stderr when an
/// entry ends the list early or the CUDA order may differ from PCI order.
VisibleDevices AllowedGpus(const GpuSnapshot& snapshot);

/// Warns on stderr (once per process) when the GPUs here are of different models and
/// CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA then numbers GPUs fastest first, so an index gpulane
/// prints (in PCI bus order) would name another card in the caller's CUDA program.
void WarnIfCudaOrderDiffers(const GpuSnapshot& snapshot);

/// The live leases and tickets of the lease directory when there is one (empty when none exists
/// yet or it cannot be opened: nothing is leased then). Never creates the directory.
lease::DirContents ReadLeaseDirIfPresent(const gpulane::Clock& clock);

/// Whether stdout should get colour: `mode` "always"/"never"/"auto" (auto: a terminal and no NO_COLOR).
bool UseColor(const std::string& mode);

/// Who holds each GPU of `snapshot` now, from leases read from the lease directory
/// (ReadLeaseDirIfPresent): GPU or MIG device UUID -> "job 12 (alice)" (several memory-sharing jobs
/// joined with ", "); a live file that is no readable lease holds what it names, or every GPU:
/// "held by an unreadable lease (bob: not JSON)".
std::map<std::string, std::string> LeaseHolders(const std::vector<lease::LeaseRecord>& leases, const GpuSnapshot& snapshot);

/// This machine's host name.
std::string HostName();

}  // namespace gpulane::cli
