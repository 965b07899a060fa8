#pragma once
// Rendering a snapshot for `gpulane status`: the text view for terminals and the JSON document
// (schema in docs/status-json.md). Pure: the caller supplies host name, time and what is allowed.
#include <cstdint>
#include <ctime>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/types.h"
#include "gpu/visible_devices.h"

namespace gpulane {

/// A process of a gpulane job on a GPU that job did not lease (lease::StrayProcess): the scheduler
/// counts it as foreign there.
struct StrayMark {
  std::string job_id;  ///< "r4121" for `gpulane run`, "12" for a queued job (its lease's job_id)
  std::string job_text;  ///< the job as people name it: "12_3" for an array's task, else job_id
  std::string user;    ///< the job's owner
};

/// Facts about the moment and the caller that the snapshot does not hold.
struct StatusContext {
  std::string hostname;
  std::time_t now = 0;                              ///< seconds since the epoch
  std::optional<std::string> cuda_visible_devices;  ///< the inherited value, if set
  std::optional<std::string> slurm_gpus;            ///< inside a Slurm job: its GPUs (SLURM_STEP_GPUS/SLURM_JOB_GPUS)
  VisibleDevices visible;                           ///< what that value allows
  std::map<std::string, std::string> holders;       ///< GPU UUID -> "job 12 (alice)", "job 12_3 (alice)": current lease holder
  /// GPU UUID -> "job 12 (alice)": the waiting request the line holds it for, as pick and run
  /// decide (lease::HeldForLine); a newcomer gets it only by backfill.
  std::map<std::string, std::string> reserved;
  std::map<std::pair<unsigned, std::uint32_t>, StrayMark> strays;  ///< (PCI index, pid) -> the job it strayed from
  std::vector<std::string> lease_warnings;  ///< what the lease directory holds that gpulane cannot read (text view)
};

/// Options of the text view.
struct TextOptions {
  bool color = false;            ///< ANSI colours (only on a terminal without NO_COLOR)
  bool full_processes = false;   ///< -p: one line per process with its whole command line
};

/// The text view: a header line, one line per GPU, and with full_processes a line per process.
std::string RenderStatusText(const GpuSnapshot& snapshot, const StatusContext& context, const TextOptions& options);

/// The JSON document of `gpulane status --json` (docs/status-json.md, schema_version 1).
nlohmann::ordered_json StatusToJson(const GpuSnapshot& snapshot, const StatusContext& context);

/// "CUDA 13.0" style version text from NVML's integer (13000 -> "13.0").
std::string FormatCudaVersion(int version);

}  // namespace gpulane
