#pragma once
// One codec per message, derived from one field list (issue 25, item 1). A message struct names its
// members once, in a template over a visitor:
//
//   struct LogsRequest {
//     nlohmann::json id; std::uint64_t offset = 0; std::string stream = "out";
//     template <typename V> void Fields(V& v) { v("id", id); v("offset", offset); v("stream", stream); }
//   };
//
// and both directions come from that list: FieldEncoder writes the members into a JSON object
// (an std::optional only when set), FieldDecoder reads them back, checking each member's type. So a
// field added to the list is sent and read alike; nothing is written twice. A member absent or null
// keeps its default. Members of other types than those below (a job's spec, job ids in Slurm's
// notation) are carried as nlohmann::json and read by their own codec in store/.
//
// A visitor call may carry a third argument: the line a value of the wrong type gets instead of the
// generic one, for fields whose errors are documented (docs/protocol.md).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpulane::proto {

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

/// Writes members into `out`, a JSON object.
class FieldEncoder {
 public:
  explicit FieldEncoder(nlohmann::json& out) : out_(out) {}
  template <typename T>
  void operator()(const char* key, const T& value, const char* /*why*/ = nullptr) {
    if constexpr (IsOptional<T>::value) {
      if (value) Put(key, *value);
    } else {
      Put(key, value);
    }
  }

 private:
  template <typename T>
  void Put(const char* key, const T& value) {
    if constexpr (requires(T& t, FieldEncoder& e) { t.Fields(e); }) {
      nlohmann::json inner = nlohmann::json::object();
      FieldEncoder encoder(inner);
      const_cast<T&>(value).Fields(encoder);
      out_[key] = std::move(inner);
    } else {
      out_[key] = value;
    }
  }

  nlohmann::json& out_;
};

/// Reads members from `in`, a JSON object; the first member of the wrong type stops it: error()
/// then holds the line: `why` when the field list gave one (a whole line), else "malformed <op>
/// request: \"key\" must be ..." (or, for a stored record's reader, `prefix` and the same).
class FieldDecoder {
 public:
  FieldDecoder(const nlohmann::json& in, std::string_view op) : in_(in), prefix_(fmt::format("malformed {} request: ", op)) {}
  /// Errors read "<prefix.text>\"key\" must be ..." ("job: ", store::JobFromJson).
  struct Prefix {
    std::string text;
  };
  FieldDecoder(const nlohmann::json& in, Prefix prefix) : in_(in), prefix_(std::move(prefix.text)) {}
  template <typename T>
  void operator()(const char* key, T& value, const char* why = nullptr) {
    if (!error_.empty()) return;
    auto it = in_.find(key);
    if (it == in_.end() || it->is_null()) return;
    std::string problem;
    if constexpr (IsOptional<T>::value) {
      typename T::value_type v{};
      problem = Read(*it, v, key);
      if (problem.empty()) value = std::move(v);
    } else {
      problem = Read(*it, value, key);
    }
    if (problem == "-") return;  // a nested message's member: its line is set
    if (!problem.empty()) error_ = why ? std::string(why) : prefix_ + problem;
  }
  /// "" when every member read was of its type, else the line for the first that was not.
  const std::string& error() const { return error_; }

 private:
  std::string Read(const nlohmann::json& j, bool& out, const char* key) {
    if (!j.is_boolean()) return fmt::format("\"{}\" must be true or false", key);
    out = j.get<bool>();
    return "";
  }
  std::string Read(const nlohmann::json& j, std::string& out, const char* key) {
    if (!j.is_string()) return fmt::format("\"{}\" must be a string", key);
    out = j.get<std::string>();
    return "";
  }
  std::string Read(const nlohmann::json& j, double& out, const char* key) {
    if (!j.is_number()) return fmt::format("\"{}\" must be a number", key);
    out = j.get<double>();
    return "";
  }
  std::string Read(const nlohmann::json& j, nlohmann::json& out, const char*) {
    out = j;
    return "";
  }
  template <typename T>
  std::string Read(const nlohmann::json& j, std::vector<T>& out, const char* key) {
    if (!j.is_array()) return fmt::format("\"{}\" must be a list", key);
    out.clear();
    for (const auto& e : j) {
      T v{};
      if (std::string problem = Read(e, v, key); !problem.empty()) return problem + " (each element)";
      out.push_back(std::move(v));
    }
    return "";
  }
  template <typename T>
    requires requires(T& t, FieldDecoder& d) { t.Fields(d); }
  std::string Read(const nlohmann::json& j, T& out, const char* key) {
    if (!j.is_object()) return fmt::format("\"{}\" must be an object", key);
    FieldDecoder inner(j, Prefix{prefix_});
    out.Fields(inner);
    if (!inner.error_.empty()) error_ = inner.error_;  // the inner member's own line
    return inner.error_.empty() ? "" : "-";
  }
  template <typename T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  std::string Read(const nlohmann::json& j, T& out, const char* key) {
    if constexpr (std::is_unsigned_v<T>) {
      // A whole number >= 0, however it was made (parsed JSON holds one as unsigned, C++ as signed).
      const bool whole = j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0);
      if (!whole) return fmt::format("\"{}\" must be a whole number >= 0", key);
      if (j.get<std::uint64_t>() > std::numeric_limits<T>::max()) return fmt::format("\"{}\" is too large", key);
    } else {
      if (!j.is_number_integer()) return fmt::format("\"{}\" must be a whole number", key);
      if (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        return fmt::format("\"{}\" is out of range", key);
      const auto v = j.get<std::int64_t>();
      if (v > std::numeric_limits<T>::max() || v < std::numeric_limits<T>::min())
        return fmt::format("\"{}\" is out of range", key);
    }
    out = j.get<T>();
    return "";
  }

  const nlohmann::json& in_;
  std::string prefix_;
  std::string error_;
};

/// The members of `message` as a JSON object.
template <typename M>
nlohmann::json EncodeFields(const M& message) {
  nlohmann::json out = nlohmann::json::object();
  FieldEncoder encoder(out);
  const_cast<M&>(message).Fields(encoder);  // Fields only reads through the encoder
  return out;
}

}  // namespace gpulane::proto
