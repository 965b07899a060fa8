#include "render/queue_json.h"

#include <array>
#include <charconv>
#include <cmath>
#include <string_view>

#include <nlohmann/json.hpp>

#include "store/job_fields.h"
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

}  // namespace

void AppendQueueJobJson(const store::Job& job, const std::vector<unsigned>& gpu_indices, std::string& out,
                        bool commands) {
  // store::JobToJson(job, false) plus "gpu_indices" (the daemon's JobForClient): one field list.
  Writer w(out, 2);
  store::WriteJob(w, job, /*with_env=*/false, commands, &gpu_indices);
}

const char* QueueJsonSeparator(std::size_t index) { return index == 0 ? "[\n  " : ",\n  "; }

const char* QueueJsonEnd(std::size_t count) { return count == 0 ? "[]\n" : "\n]\n"; }

}  // namespace gpulane
