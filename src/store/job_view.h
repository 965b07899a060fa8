#pragma once
// What a client sees of a job it may not act on (docs/security.md, "Privacy"). Everyone sees every
// job's id, user, name, state, GPUs and times (as in `squeue`); a job's command line, working
// directory and log paths only its owner, root and daemon.admin_group see, unless the machine's
// `daemon.show_commands` shows them to all; its environment and notification target only they,
// whatever the setting. A field that is hidden says so: it holds kHiddenField and a
// "<field>_hidden": true stands beside it, never an empty value that would read as "none".
#include <nlohmann/json.hpp>

namespace gpulane::store {

/// The fields of a job a client may see.
struct JobVisibility {
  bool commands = true;  ///< spec.argv, spec.cwd, spec.output_path, spec.error_path, logs' paths
  bool env = true;       ///< spec.env, spec.notify
};

/// Everything: the job's owner, root, an admin.
inline constexpr JobVisibility kSeesAll{true, true};

/// What a hidden field holds.
inline constexpr const char* kHiddenField = "(hidden: another user's job)";

/// Hides, in a job object of JobToJson (or of the daemon's replies built on it), every field `v`
/// does not allow: its value becomes kHiddenField and "<field>_hidden": true is added beside it
/// (spec.env is marked whether or not the object held it; spec.notify and the logs only when held).
void HideFields(nlohmann::json& job, JobVisibility v);

}  // namespace gpulane::store
