// gpulane share: every user's share, decayed GPU use and fair-share factor, as the daemon's
// priority sees them (like Slurm's sshare). Thin: the daemon decides (sched/fairshare.h), render/
// words it.
#include <fmt/format.h>
#include <memory>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "render/share_table.h"
#include "util/exit_codes.h"

namespace gpulane::cli {
namespace {

using nlohmann::json;

// With no daemon running (and none installed) nobody has used anything through one: an empty table.
int RunShare(bool as_json) {
  auto answer = CallIfRunning({{"op", "share"}});
  if (!answer) return Fail(answer.error());
  json rows = json::array();
  double half_life_s = 86400;
  if (*answer) {
    const json& reply = **answer;
    if (reply.contains("warnings"))
      for (const auto& line : reply["warnings"])
        if (line.is_string()) Warn(line.get<std::string>());
    if (reply.contains("users")) rows = reply["users"];
    if (reply.contains("half_life_s") && reply["half_life_s"].is_number()) half_life_s = reply["half_life_s"].get<double>();
  }
  if (as_json) {
    fmt::print("{}\n", json{{"half_life_s", half_life_s}, {"users", rows}}.dump(2));
    return kExitOk;
  }
  fmt::print("{}", ShareTableText(ShareRowsFromJson(rows), half_life_s));
  return kExitOk;
}

}  // namespace

void RegisterShare(CLI::App& app, Runner* run, const os::Env&) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* share = app.add_subcommand("share", "Show every user's share, decayed GPU use and fair-share factor");
  share->add_flag("--json", *as_json, "Print them as JSON");
  share->callback([as_json, run] { *run = [as_json] { return RunShare(*as_json); }; });
}

}  // namespace gpulane::cli
