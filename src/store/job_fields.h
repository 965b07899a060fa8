#pragma once
// A job's JSON members, written once (issue 25, item 4) for every writer of
// util/json_tree_writer.h's calls: the tree writer behind store::JobToJson, SpecToJson and
// LogsToJson (the wire, jobs.db, the supervisor's spec and status files) and the text writer of the
// streamed `queue --json` (render/queue_json.cc), which must write the bytes nlohmann's dump(2)
// writes for the tree. Before, the text writer was a second copy of the list, and it had drifted:
// `queue --json` lacked a request's preemptible, mig_profile and preemptions.
//
// Members in sorted order (nlohmann keeps an object's members sorted); optional ones only when set.
// `commands`: whether spec.argv, spec.cwd and the log paths are written, or hidden as
// store/job_view.h's HideFields hides them; `with_env`: whether spec.env and spec.notify are
// written at all (a listing has no environment).
#include <string>
#include <string_view>
#include <vector>

#include "proto/request_fields.h"
#include "store/job.h"
#include "store/job_id.h"
#include "store/job_view.h"
#include "util/notify_target.h"

namespace gpulane::store {

/// A job's dependencies: an id as a number, a task as "12_3".
template <typename W>
void WriteDeps(W& w, const std::vector<JobRef>& deps) {
  w.BeginArray();
  for (const JobRef& dep : deps) {
    w.Element();
    if (dep.task) w.String(FormatJobRef(dep));
    else w.Int(dep.id);
  }
  w.EndArray();
}

/// A byte field, or kHiddenField and "<key>_hidden": true when not `shown`.
template <typename W>
void WriteBytesOrHidden(W& w, const char* key, std::string_view v, bool shown) {
  w.Key(key);
  if (shown) return w.Bytes(v);
  w.String(kHiddenField);
  w.Key((std::string(key) + "_hidden").c_str());
  w.Bool(true);
}

template <typename W>
void WriteLogs(W& w, const JobLogs& logs, bool commands = true) {
  w.BeginObject();
  if (logs.stderr_end) {
    w.Key("stderr_end");
    w.Int(*logs.stderr_end);
  }
  w.Key("stderr_offset");
  w.Int(logs.stderr_offset);
  WriteBytesOrHidden(w, "stderr_path", logs.stderr_path, commands);
  if (logs.stdout_end) {
    w.Key("stdout_end");
    w.Int(*logs.stdout_end);
  }
  w.Key("stdout_offset");
  w.Int(logs.stdout_offset);
  WriteBytesOrHidden(w, "stdout_path", logs.stdout_path, commands);
  w.EndObject();
}

template <typename W>
void WriteSpec(W& w, const JobSpec& s, bool with_env, bool commands = true) {
  w.BeginObject();
  w.Key("after_any");
  WriteDeps(w, s.after_any);
  w.Key("after_ok");
  WriteDeps(w, s.after_ok);
  w.Key("argv");
  if (commands) {
    w.BytesList(s.argv);
  } else {
    w.String(kHiddenField);
    w.Key("argv_hidden");
    w.Bool(true);
  }
  WriteBytesOrHidden(w, "cwd", s.cwd, commands);
  if (with_env) {
    w.Key("env");
    w.BytesList(s.env);
  }
  WriteBytesOrHidden(w, "error_path", s.error_path, commands);
  w.Key("kill_grace_s");
  w.Double(s.kill_grace_s);
  w.Key("name");
  w.String(s.name);
  // The notification target goes with the environment: its webhook or command may hold a secret.
  if (with_env && s.notify) {
    w.Key("notify");
    WriteNotifyTarget(w, *s.notify);
  }
  WriteBytesOrHidden(w, "output_path", s.output_path, commands);
  w.Key("request");
  proto::WriteRequest(w, s.request);
  w.Key("retries");
  w.Int(s.retries);
  w.EndObject();
}

/// The job for clients; with "gpu_indices" when `gpu_indices` is given (the daemon's listing).
template <typename W>
void WriteJob(W& w, const Job& job, bool with_env, bool commands = true,
              const std::vector<unsigned>* gpu_indices = nullptr) {
  w.BeginObject();
  if (job.array_index) {
    w.Key("array_index");
    w.Int(*job.array_index);
  }
  if (job.array_job_id) {
    w.Key("array_job_id");
    w.Int(*job.array_job_id);
  }
  if (!job.attempts.empty()) {
    w.Key("attempt");
    w.Int(job.attempts.size());
  }
  if (job.end_time) {
    w.Key("end_time");
    w.Double(*job.end_time);
  }
  if (job.exit_code) {
    w.Key("exit_code");
    w.Int(*job.exit_code);
  }
  if (gpu_indices) {
    w.Key("gpu_indices");
    w.BeginArray();
    for (unsigned i : *gpu_indices) {
      w.Element();
      w.Int(i);
    }
    w.EndArray();
  }
  w.Key("gpu_uuids");
  w.Strings(job.gpu_uuids);
  w.Key("id");
  w.Int(job.id);
  w.Key("id_text");
  w.String(JobIdText(job));
  if (const JobLogs logs = LogsOf(job); !logs.stdout_path.empty() || !logs.stderr_path.empty()) {
    w.Key("logs");
    WriteLogs(w, logs, commands);
  }
  if (const int preemptions = Preemptions(job); preemptions > 0) {  // sched/preemption.h
    w.Key("preemptions");
    w.Int(preemptions);
  }
  w.Key("reason");
  w.String(job.reason);
  w.Key("spec");
  WriteSpec(w, job.spec, with_env, commands);
  if (job.start_time) {
    w.Key("start_time");
    w.Double(*job.start_time);
  }
  w.Key("state");
  w.String(StateName(job.state));
  w.Key("submit_time");
  w.Double(job.submit_time_s());
  w.Key("uid");
  w.Int(job.uid());
  w.Key("user");
  w.String(job.user());
  w.EndObject();
}

}  // namespace gpulane::store
