#include "util/shell_words.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/strings.h"

namespace gpulane {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsOperator(char c) { return c == '|' || c == '&' || c == ';' || c == '<' || c == '>' || c == '(' || c == ')'; }

Error Bad(std::string message) { return MakeError(ErrorKind::kInvalidArgument, std::move(message)); }

// "'$' at column 5 would be expanded by a shell ...": the fix for what only a shell can do.
Error NeedsShell(char c, std::size_t at) {
  const bool expansion = c == '$' || c == '`';
  return Bad(StrCat("'", c, "' at column ", at + 1, expansion ? " would be expanded by a shell" : " is shell syntax",
                    ", and command lines are not run through one: quote it ('", c, "'), escape it (\\", c,
                    "), or write the line as sh -c '...'"));
}

// Reads a double-quoted part starting after its opening quote at `open`; `i` ends after the closing quote.
Status ReadDoubleQuoted(std::string_view line, std::size_t open, std::size_t& i, std::string& word) {
  while (i < line.size()) {
    const char c = line[i];
    if (c == '"') {
      ++i;
      return Status::Ok();
    }
    if (c == '\\' && i + 1 < line.size() && std::strchr("\"\\$`", line[i + 1])) {
      word += line[i + 1];
      i += 2;
      continue;
    }
    if (c == '$' || c == '`') return NeedsShell(c, i);
    word += c;
    ++i;
  }
  return Bad(StrCat("unterminated double quote (\") opened at column ", open + 1, ": close it on the same line"));
}

}  // namespace

Result<std::vector<std::string>> SplitShellWords(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // a word has begun (also an empty one, from '' or "")
  std::size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (IsBlank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++i;
    } else if (c == '#' && !in_word) {
      break;  // a comment to the end of the line
    } else if (c == '\'') {
      const std::size_t close = line.find('\'', i + 1);
      if (close == std::string_view::npos)
        return Bad(StrCat("unterminated single quote (') opened at column ", i + 1, ": close it on the same line"));
      word.append(line.substr(i + 1, close - i - 1));
      in_word = true;
      i = close + 1;
    } else if (c == '"') {
      const std::size_t open = i++;
      if (Status s = ReadDoubleQuoted(line, open, i, word); !s.ok()) return s.error();
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 == line.size())
        return Bad(StrCat("a backslash ends the line (column ", i + 1,
                          "): a command is one line; escape it (\\\\) for a backslash"));
      word += line[i + 1];
      in_word = true;
      i += 2;
    } else if (c == '$' || c == '`' || IsOperator(c)) {
      return NeedsShell(c, i);
    } else {
      word += c;
      in_word = true;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<std::vector<CommandLine>> ParseCommandFile(std::string_view text, std::string_view name) {
  std::vector<CommandLine> commands;
  int number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos)
      return Bad(StrCat(name, ":", number, ": a NUL byte: a command file is text, one command per line"));
    auto words = SplitShellWords(line);
    if (!words) return Bad(StrCat(name, ":", number, ": ", words.error().message));
    if (!words->empty()) commands.push_back({number, std::move(words).value()});
  }
  if (commands.empty())
    return Bad(StrCat(name, " has no commands: write one command per line (blank lines and # comments are skipped)"));
  return commands;
}

Result<std::vector<CommandLine>> ReadCommandFile(const std::string& path) {
  std::FILE* file = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!file) return Bad(StrCat("cannot read the command file ", path, ": ", std::strerror(errno)));
  std::string text;
  char buffer[65536];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  const int error = std::ferror(file) ? errno : 0;
  if (file != stdin) std::fclose(file);
  if (error) return Bad(StrCat("cannot read the command file ", path, ": ", std::strerror(error)));
  return ParseCommandFile(text, path == "-" ? "<stdin>" : path);
}

}  // namespace gpulane

namespace gpulane {

std::string QuoteForShell(std::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string QuoteForShellIfNeeded(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || (c != 0 && std::strchr("_@%+=:,./-", c) != nullptr);
  });
  return plain ? std::string(word) : QuoteForShell(word);
}

std::string CommandLineText(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) out += (out.empty() ? "" : " ") + QuoteForShellIfNeeded(word);
  return out;
}

}  // namespace gpulane
