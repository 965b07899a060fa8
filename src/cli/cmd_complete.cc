// gpulane _complete jobs|gpus: the words shell completion offers for a job id or a GPU, one a line
// on stdout (packaging/completions/: bash, zsh and fish call it). Quiet and quick by design: any
// failure (no daemon, no driver, a broken config) prints nothing and exits 0, and a daemon is
// given at most 2 s, so a completion never hangs a prompt or prints errors into it.
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "util/exit_codes.h"

namespace gpulane::cli {
namespace {

// The caller's queued and running jobs' ids ("12", "12_3"): the first column of queue's table.
void PrintJobIds() {
  auto answer = CallIfRunning({{"op", "queue"}, {"all", false}, {"format", "table"}}, 2, false, IfDown::kStartNone);
  if (!answer || !*answer) return;
  const std::string table = (**answer).value("table", "");
  std::string_view rest = table;
  bool header = true;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (header) {
      header = false;
      continue;
    }
    const std::size_t start = line.find_first_not_of(' ');
    if (start == std::string_view::npos) continue;
    line = line.substr(start);
    const std::string_view id = line.substr(0, line.find(' '));
    if (!id.empty() && id.front() >= '0' && id.front() <= '9') fmt::print("{}\n", id);
  }
}

// Every GPU's index (PCI order, as status numbers them) and UUID.
void PrintGpus(const os::Env& env) {
  auto backend = OpenBackend(env);
  if (!backend) return;
  auto snapshot = (*backend)->Read({});
  if (!snapshot) return;
  for (const GpuDevice& d : snapshot->devices) fmt::print("{}\n{}\n", d.pci_index, d.uuid);
}

}  // namespace

void RegisterComplete(CLI::App& app, Runner* run, const os::Env& env) {
  auto what = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("_complete", "Words for shell completion: job ids or GPUs");
  sub->group("");  // internal: not listed in --help
  sub->add_option("what", *what, "jobs or gpus")->required()->check(CLI::IsMember({"jobs", "gpus"}));
  sub->callback([what, run, &env] {
    *run = [what, &env] {
      if (*what == "jobs") PrintJobIds();
      else PrintGpus(env);
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace gpulane::cli
