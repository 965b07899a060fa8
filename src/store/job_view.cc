#include "store/job_view.h"

namespace gpulane::store {

using nlohmann::json;

namespace {

void Hide(json& object, const char* key) {
  object[key] = kHiddenField;
  object[std::string(key) + "_hidden"] = true;
}

}  // namespace

void HideFields(json& job, JobVisibility v) {
  if (!job.is_object()) return;
  json& spec = job["spec"];
  if (!spec.is_object()) spec = json::object();
  if (!v.commands) {
    for (const char* key : {"argv", "cwd", "output_path", "error_path"}) Hide(spec, key);
    if (auto logs = job.find("logs"); logs != job.end() && logs->is_object())
      for (const char* key : {"stdout_path", "stderr_path"}) Hide(*logs, key);
  }
  if (!v.env) {
    Hide(spec, "env");
    if (spec.contains("notify")) Hide(spec, "notify");
  }
}

}  // namespace gpulane::store
