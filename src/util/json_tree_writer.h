#pragma once
// A JSON writer that builds an nlohmann::json value, for the field lists written once for two
// writers (proto/request_fields.h, store/job_fields.h): this one for the wire, the store and the
// spec file; render/queue_json.cc's text writer for the streamed `queue --json`. Both take the
// same calls: BeginObject/EndObject, Key, BeginArray/Element/EndArray, and the values.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/bytes_json.h"

namespace gpulane {

class JsonTreeWriter {
 public:
  void BeginObject() { open_.push_back(&Place(nlohmann::json::object())); }
  void EndObject() { open_.pop_back(); }
  void BeginArray() { open_.push_back(&Place(nlohmann::json::array())); }
  void EndArray() { open_.pop_back(); }
  void Key(const char* key) { key_ = key; }
  void Element() {}

  void String(std::string_view v) { Place(std::string(v)); }
  void Double(double v) { Place(v); }
  void Bool(bool v) { Place(v); }
  template <typename T>
  void Int(T v) { Place(v); }
  void Strings(const std::vector<std::string>& values) { Place(values); }
  void Bytes(std::string_view v) { Place(BytesToJson(v)); }
  void BytesList(const std::vector<std::string>& values) { Place(BytesListToJson(values)); }

  /// What was written (the first value, with everything inside it).
  nlohmann::json Take() { return std::move(root_); }

 private:
  // Puts `v` where the next value goes: the pending key of the open object, the end of the open
  // list, or the root. A reference to it stays valid while it is open: an object's members are a
  // map's, and a list only grows while none of its elements is open.
  nlohmann::json& Place(nlohmann::json v) {
    if (open_.empty()) return root_ = std::move(v);
    nlohmann::json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return parent.back();
    }
    return parent[key_] = std::move(v);
  }

  nlohmann::json root_;
  std::vector<nlohmann::json*> open_;
  std::string key_;
};

}  // namespace gpulane
