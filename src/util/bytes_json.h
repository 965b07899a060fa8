#pragma once
// Arbitrary bytes in JSON, losslessly. A command's argv, its environment, its working directory and
// its log paths are bytes to the kernel, not text: "\xff\xfe" is a valid argument. JSON strings
// hold Unicode only, so a value that is not well-formed UTF-8 (util/utf8.h) is written as an
// object holding its bytes in base64 (RFC 4648, with padding):
//
//   "printf"                 a value that is UTF-8 (almost all): a plain JSON string, as before
//   {"b64": "//4="}          the bytes ff fe
//
// Readers accept both forms, so specs and requests written before this encoding read as they did.
// Used by the spec codec (store/job.h SpecToJson, SpecFromJson: the protocol, the store, the
// supervisor's spec file) and by render/queue_json, which writes the same JSON by hand.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulane {

/// Standard base64 with '=' padding.
std::string Base64Encode(std::string_view bytes);
/// Decodes standard base64 with padding (length a multiple of 4, no whitespace); nullopt for
/// anything else, non-canonical trailing bits included.
std::optional<std::string> Base64Decode(std::string_view text);

/// `bytes` as JSON: the string itself when it is well-formed UTF-8, else {"b64": "<base64>"}.
nlohmann::json BytesToJson(std::string_view bytes);
/// Reads either form into *out; false (out untouched) for any other JSON value, including an object
/// with other members or a "b64" that is not valid base64.
bool BytesFromJson(const nlohmann::json& j, std::string* out);

/// A list of byte strings (argv, environment entries), each as BytesToJson writes it.
nlohmann::json BytesListToJson(const std::vector<std::string>& values);
/// Reads a list written by BytesListToJson (or a plain list of strings); false when `j` is not a
/// list or an element is neither form.
bool BytesListFromJson(const nlohmann::json& j, std::vector<std::string>* out);

}  // namespace gpulane
