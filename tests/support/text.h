#pragma once
// Small helpers for reading what gpulane printed.
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpulane::test {

/// The lines of `text`, without their '\n'; a last line without '\n' counts too.
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The first line of `text` that starts with `prefix` ("" when none).
inline std::string LineStartingWith(const std::string& text, const std::string& prefix) {
  for (const std::string& line : Lines(text))
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

/// Whether `line` is the supervisor's last line for a job that gpulane stopped, "gpulane: stopped
/// after <seconds, one decimal> s: <words>", with exactly these `words`.
inline bool IsStoppedAfterLine(const std::string& line, const std::string& words) {
  static const std::regex head(R"(gpulane: stopped after [0-9]+\.[0-9] s: )");
  std::smatch m;
  return std::regex_search(line, m, head, std::regex_constants::match_continuous) && line.substr(m.length()) == words;
}

/// Number of lines (of '\n') in `text`.
inline long LineCount(const std::string& text) {
  long n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

/// Every complete line (ended by '\n') of `text` parsed as JSON; throws on a line that is not.
inline std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::size_t start = 0, end;
  while ((end = text.find('\n', start)) != std::string::npos) {
    out.push_back(nlohmann::json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

/// A job id as the CLI takes it.
inline std::string Id(std::int64_t id) { return std::to_string(id); }

}  // namespace gpulane::test
