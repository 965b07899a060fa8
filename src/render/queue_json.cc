#include "render/queue_json.h"

#include <array>
#include <charconv>
#include <cmath>
#include <string_view>

#include <nlohmann/json.hpp>

#include "store/job_view.h"
#include "util/bytes_json.h"
#include "util/utf8.h"

namespace gpulane {
namespace {

// Appends a JSON string: printable ASCII as it is, anything else (escapes, UTF-8, invalid bytes)
// through nlohmann's serializer, so that the rare cases come out exactly as dump() writes them.
void AppendString(std::string_view s, std::string& out) {
  bool plain = true;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

template <typename T>
void AppendInt(T v, std::string& out) {
  char buf[24];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

// As nlohmann's serializer: the shortest text that reads back as the same double ("10.0", not
// "10"), and null for NaN and infinities.
void AppendDouble(double v, std::string& out) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  char* end = nlohmann::detail::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// dump(2)'s layout: "{", then each member on a line of its own, indented two more than the
// object, "key": value, separated by commas; the closing brace on a line at the object's
// indentation. Empty objects and lists are "{}" and "[]". The caller gives keys in sorted order
// (nlohmann keeps an object's members sorted by key).
class Writer {
 public:
  Writer(std::string& out, int indent) : out_(out), indent_(indent) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  // Starts a member of the current object.
  void Key(const char* key) {
    Next();
    out_ += '"';
    out_ += key;
    out_ += "\": ";
  }
  // Starts an element of the current list.
  void Element() { Next(); }

  void String(std::string_view v) { AppendString(v, out_); }
  void Double(double v) { AppendDouble(v, out_); }
  void Bool(bool v) { out_ += v ? "true" : "false"; }
  template <typename T>
  void Int(T v) { AppendInt(v, out_); }

  // Bytes as util/bytes_json.h writes them: a string when UTF-8, else {"b64": "..."}.
  void Bytes(std::string_view v) {
    if (IsValidUtf8(v)) return String(v);
    BeginObject();
    Key("b64");
    String(Base64Encode(v));
    EndObject();
  }
  void BytesList(const std::vector<std::string>& values) {
    BeginArray();
    for (const auto& v : values) {
      Element();
      Bytes(v);
    }
    EndArray();
  }

  void Strings(const std::vector<std::string>& values) {
    BeginArray();
    for (const auto& v : values) {
      Element();
      String(v);
    }
    EndArray();
  }

 private:
  void Open(char bracket) {
    out_ += bracket;
    indent_ += 2;
    empty_[++depth_] = true;
  }
  void Close(char bracket) {
    indent_ -= 2;
    if (!empty_[depth_]) {
      out_ += '\n';
      out_.append(static_cast<std::size_t>(indent_), ' ');
    }
    out_ += bracket;
    --depth_;
  }
  void Next() {
    out_ += empty_[depth_] ? "\n" : ",\n";
    empty_[depth_] = false;
    out_.append(static_cast<std::size_t>(indent_), ' ');
  }

  std::string& out_;
  int indent_;
  // Whether the object or list open at each depth has no member yet; a job is 4 deep at most
  // (job, spec, request, allowed_uuids; job, spec, argv, a {"b64"} argument).
  std::array<bool, 8> empty_{};
  int depth_ = 0;
};

// store::DepsToJson: a job's id as a number, a task as "12_3".
void Deps(Writer& w, const std::vector<store::JobRef>& deps) {
  w.BeginArray();
  for (const store::JobRef& dep : deps) {
    w.Element();
    if (dep.task) w.String(store::FormatJobRef(dep));
    else w.Int(dep.id);
  }
  w.EndArray();
}

// proto::RequestToJson.
void Request(Writer& w, const sched::Request& r) {
  w.BeginObject();
  if (r.allowed_uuids) {
    w.Key("allowed_uuids");
    w.Strings(*r.allowed_uuids);
  }
  w.Key("count");
  w.Int(r.count);
  w.Key("gpu_list");
  w.String(r.gpu_list);
  if (r.max_util_pct) {
    w.Key("max_util_pct");
    w.Int(*r.max_util_pct);
  }
  if (r.mem_bytes) {
    w.Key("mem_bytes");
    w.Int(*r.mem_bytes);
  }
  if (r.min_free_bytes) {
    w.Key("min_free_bytes");
    w.Int(*r.min_free_bytes);
  }
  if (r.order) {  // as RequestToJson: absent when no --order was given
    w.Key("order");
    w.String(sched::OrderName(*r.order));
  }
  if (!r.partition.empty()) {
    w.Key("partition");
    w.String(r.partition);
  }
  w.Key("priority");
  w.Int(r.priority);
  w.Key("share_foreign");
  w.Bool(r.share_foreign);
  w.Key("submit_time_s");
  w.Double(r.submit_time_s);
  if (r.time_limit_s) {
    w.Key("time_limit_s");
    w.Double(*r.time_limit_s);
  }
  w.Key("uid");
  w.Int(r.uid);
  w.Key("user");
  w.String(r.user);
  w.EndObject();
}

// A byte field, or kHiddenField and "<key>_hidden": true when hidden (store/job_view.h).
void BytesOrHidden(Writer& w, const char* key, std::string_view v, bool shown) {
  w.Key(key);
  if (shown) return w.Bytes(v);
  w.String(store::kHiddenField);
  w.Key((std::string(key) + "_hidden").c_str());
  w.Bool(true);
}

// store::SpecToJson without the environment, hidden as store::HideFields hides it.
void Spec(Writer& w, const store::JobSpec& s, bool commands) {
  w.BeginObject();
  w.Key("after_any");
  Deps(w, s.after_any);
  w.Key("after_ok");
  Deps(w, s.after_ok);
  w.Key("argv");
  if (commands) {
    w.BytesList(s.argv);
  } else {
    w.String(store::kHiddenField);
    w.Key("argv_hidden");
    w.Bool(true);
  }
  BytesOrHidden(w, "cwd", s.cwd, commands);
  BytesOrHidden(w, "error_path", s.error_path, commands);
  w.Key("kill_grace_s");
  w.Double(s.kill_grace_s);
  w.Key("name");
  w.String(s.name);
  BytesOrHidden(w, "output_path", s.output_path, commands);
  w.Key("request");
  Request(w, s.request);
  w.Key("retries");
  w.Int(s.retries);
  w.EndObject();
}

// store::LogsToJson.
void Logs(Writer& w, const store::JobLogs& logs, bool commands) {
  w.BeginObject();
  if (logs.stderr_end) {
    w.Key("stderr_end");
    w.Int(*logs.stderr_end);
  }
  w.Key("stderr_offset");
  w.Int(logs.stderr_offset);
  BytesOrHidden(w, "stderr_path", logs.stderr_path, commands);
  if (logs.stdout_end) {
    w.Key("stdout_end");
    w.Int(*logs.stdout_end);
  }
  w.Key("stdout_offset");
  w.Int(logs.stdout_offset);
  BytesOrHidden(w, "stdout_path", logs.stdout_path, commands);
  w.EndObject();
}

}  // namespace

void AppendQueueJobJson(const store::Job& job, const std::vector<unsigned>& gpu_indices, std::string& out,
                        bool commands) {
  // store::JobToJson(job, false) plus "gpu_indices" (daemon's JobForClient), members sorted.
  Writer w(out, 2);
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
  w.Key("gpu_indices");
  w.BeginArray();
  for (unsigned i : gpu_indices) {
    w.Element();
    w.Int(i);
  }
  w.EndArray();
  w.Key("gpu_uuids");
  w.Strings(job.gpu_uuids);
  w.Key("id");
  w.Int(job.id);
  w.Key("id_text");
  w.String(store::JobIdText(job));
  if (const store::JobLogs logs = store::LogsOf(job); !logs.stdout_path.empty() || !logs.stderr_path.empty()) {
    w.Key("logs");
    Logs(w, logs, commands);
  }
  if (const int preemptions = store::Preemptions(job); preemptions > 0) {
    w.Key("preemptions");
    w.Int(preemptions);
  }
  w.Key("reason");
  w.String(job.reason);
  w.Key("spec");
  Spec(w, job.spec, commands);
  if (job.start_time) {
    w.Key("start_time");
    w.Double(*job.start_time);
  }
  w.Key("state");
  w.String(store::StateName(job.state));
  w.Key("submit_time");
  w.Double(job.submit_time);
  w.Key("uid");
  w.Int(job.uid);
  w.Key("user");
  w.String(job.user);
  w.EndObject();
}

const char* QueueJsonSeparator(std::size_t index) { return index == 0 ? "[\n  " : ",\n  "; }

const char* QueueJsonEnd(std::size_t count) { return count == 0 ? "[]\n" : "\n]\n"; }

}  // namespace gpulane
