#pragma once
// The request options `pick`, `run` and `submit` share, registered and parsed in this one place
// into the one request type (sched::Request):
//   -g/--gpu-count N (also -n/--count), --mem SIZE, --min-free SIZE, --max-util PCT, --gpus LIST,
//   --share-foreign, --order memory|util|pci|bestfit, --partition NAME, --time-limit DURATION (run, submit),
//   --priority N (submit).
#include <string>

#include <CLI/CLI.hpp>

#include "sched/request.h"
#include "util/result.h"

namespace gpulane::cli {

/// Which of the shared options a command takes.
struct RequestOptionSet {
  bool time_limit = false;  ///< --time-limit (run, submit)
  bool priority = false;    ///< --priority (submit)
  /// The daemon takes who asks from the socket and when (submit): the request's user stays ""
  /// instead of being looked up (a user database look-up per submission), and its submission time
  /// 0 (the daemon stamps it once, by its clock).
  bool daemon_identifies = false;
  /// -g 0 is a CPU-only job (run, submit): no GPU, no lease, no partition. Otherwise (pick) an error.
  bool zero_gpus = false;
};

class RequestOptions {
 public:
  /// Adds the options to `sub`; remembers `sub` to tell "given empty" from "not given".
  void Register(CLI::App* sub, RequestOptionSet set = {});
  /// Checks and converts what was given. The request's uid is the caller's (getuid), its user and
  /// submission time too (its login name, now) unless daemon_identifies; allowed_uuids stays
  /// unresolved (nullopt) until the GPUs are known. The partition (--partition, else the machine's
  /// sched.default_partition) is checked to exist and its limits applied (sched::ApplyPartition);
  /// its GPUs and windows are the caller's to apply (cli/common.h PartitionGate).
  /// Errors: kInvalidArgument naming the option and the fix ("--mem '': give a size, e.g. 30GiB").
  Result<sched::Request> ToRequest() const;
  /// The request for another cluster's scheduler (submit --cluster slurm): the options as given,
  /// checked for form only; --partition names the cluster's partition, never this machine's, and
  /// this machine's [limits] do not apply. Errors: kInvalidArgument as for ToRequest.
  Result<sched::Request> ToClusterRequest() const;

 private:
  /// The options' values, converted and bounded; no partition, limits or user name yet.
  Result<sched::Request> ParseGiven() const;
  CLI::App* sub_ = nullptr;
  RequestOptionSet set_;
  int count_ = 1;
  std::string mem_, min_free_, gpus_, order_ = "memory", time_limit_, partition_, mig_;
  int max_util_ = -1;
  int priority_ = 0;
  bool share_foreign_ = false;
};

}  // namespace gpulane::cli
