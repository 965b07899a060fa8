#pragma once
// The GPU options `run` and `submit` share: -g, --mem, --min-free, --max-util, --gpus, --share-foreign.
#include <string>

#include <CLI/CLI.hpp>

#include "store/job.h"
#include "util/result.h"

namespace gpulane::cli {

struct GpuOptions {
  int count = 1;
  std::string mem, min_free, gpus;
  int max_util = -1;
  bool share_foreign = false;

  /// Adds the options to `sub`.
  void Register(CLI::App* sub);
  /// Checks and converts them. Errors: kInvalidArgument naming the option and the fix.
  Result<store::GpuSpec> ToSpec() const;
};

}  // namespace gpulane::cli
