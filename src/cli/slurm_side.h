#pragma once
// What the Slurm commands of cli/ share (cli/slurm_submit.cc, slurm_show.cc, slurm_jobs.cc; not
// used outside cli/): the user's Slurm side (the real runner and clock, their registry of jobs
// submitted through gpulane, the poll settings) and how a slurm:ID names registered jobs and
// polled rows.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "slurm/command_runner.h"
#include "slurm/job_registry.h"
#include "slurm/poller.h"
#include "util/clock.h"
#include "util/result.h"

namespace gpulane::cli {

/// The user's Slurm side: the real runner and clock, their registry and poll settings.
struct SlurmSide {
  slurm::RealCommandRunner runner;
  SystemClock clock;
  slurm::JobRegistry registry;
  slurm::PollSettings settings;
  explicit SlurmSide(slurm::JobRegistry r) : registry(std::move(r)) {}
};

/// Opens the user's side from their config and state folder. `create`: make the user's private
/// /tmp folder when their state lies there (submit); other commands only read what a submit left.
/// Errors: the config's, or an unsafe state folder (daemon::SecureUserPaths).
Result<std::unique_ptr<SlurmSide>> OpenSlurmSide(bool create = false);

/// The registered submissions these ids belong to ("12", "12_3" -> submission 12), each once.
/// Errors: kInvalidArgument for a malformed id; kNotFound for an id this user never submitted
/// through gpulane.
Result<std::vector<slurm::RegisteredJob>> RegisteredFor(const SlurmSide& side, const std::vector<std::string>& ids);

/// The rows of `id`: its own row, or an array's every task for the array's id.
std::vector<slurm::PolledJob> RowsOf(const std::vector<slurm::PolledJob>& rows, const std::string& id);

/// `poller.Poll(jobs)`, asked again after the poll's new-job interval (up to 3 times) while one of
/// `ids` has no rows: a job submitted since the last shared poll is not in it yet. For commands
/// that read once (show, cancel, hold, release, logs). Errors: Poller::Poll's.
Result<std::vector<slurm::PolledJob>> PollCovering(const SlurmSide& side, slurm::Poller& poller,
                                                   const std::vector<slurm::RegisteredJob>& jobs,
                                                   const std::vector<std::string>& ids);

/// The GPU column of queue and show: the job's GPU count.
std::string GpusText(const slurm::RegisteredJob& job);

/// One job as `show --json` and `queue --json` print it (id_text "slurm:ID", cluster "slurm").
nlohmann::json JobJson(const slurm::RegisteredJob& job, const slurm::PolledJob& row);

/// A log pattern with sbatch's %j %A %a %x %u %% filled in, relative to the job's directory.
std::string LogPath(const std::string& pattern, const slurm::RegisteredJob& job, const slurm::PolledJob& row);

}  // namespace gpulane::cli
