#pragma once
// Command files (`gpulane submit --array-file`, `gpulane run --each`): one command per line, split
// into words as a POSIX shell splits them, but never run through a shell. Pure functions.
//
// A line is split like sh(1) splits a simple command (POSIX "Token Recognition" and "Quoting"):
//   - blanks (space, tab) separate words; a word may join quoted and unquoted parts (a'b c'd);
//   - '...' keeps everything inside as it is; "..." too, except that a backslash before " \ $ or `
//     stands for that character; outside quotes a backslash stands for the next character;
//   - '' and "" make an empty word; an unquoted # at the start of a word starts a comment.
// Nothing is expanded: no variables, no command substitution, no globbing, no ~. What a shell would
// expand or treat as syntax is refused rather than passed on as text the user did not mean: an
// unquoted (or double-quoted) $ or `, and an unquoted | & ; < > ( ). Glob characters (* ? [) and ~
// stay as written, which is what a shell does when nothing matches. A line that needs a shell says
// so itself: `sh -c 'python a.py > out.txt'` is the words sh, -c and the script.
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpulane {

/// The words of one line (no newline in it), as described above; empty for a blank or comment
/// line. Errors: kInvalidArgument, one phrase naming the problem, its column (1-based, in bytes)
/// and the fix ("unterminated single quote (') opened at column 8: close it on the same line"),
/// without the line number (ParseCommandFile adds it).
Result<std::vector<std::string>> SplitShellWords(std::string_view line);

/// One command of a command file.
struct CommandLine {
  int line = 0;                   ///< its line number in the file, from 1
  std::vector<std::string> argv;  ///< its words
};

/// Every command of a command file's text, in file order: blank lines and comment lines are
/// skipped; a line's trailing '\r' (a file saved with CRLF line ends) is dropped. `name` names the
/// file in errors. Errors: kInvalidArgument "<name>:<line>: <problem and fix>" for the first bad
/// line (also a NUL byte), or "<name> has no commands: ..." when there are none.
Result<std::vector<CommandLine>> ParseCommandFile(std::string_view text, std::string_view name);

/// Reads and parses the command file at `path` ("-" is standard input). Errors: those of
/// ParseCommandFile; kInvalidArgument when it cannot be read (naming the file and errno's text).
Result<std::vector<CommandLine>> ReadCommandFile(const std::string& path);

}  // namespace gpulane

namespace gpulane {

/// `word` as one word for sh(1): single-quoted, each ' written as '\'' ("it's" -> 'it'\''s').
/// Any bytes, newlines included, come back exactly (SplitShellWords and /bin/sh agree; unit-tested).
std::string QuoteForShell(std::string_view word);

/// `word` as sh(1) reads it back, quoted only where it has to be: a non-empty word of letters,
/// digits and `_@%+=:,./-` as it is ("train.py", "--lr=3e-4"), any other QuoteForShell's. For
/// showing a command a user can copy (`show`'s "command" line).
std::string QuoteForShellIfNeeded(std::string_view word);

/// `argv` as one line sh(1) splits back into the same words: QuoteForShellIfNeeded of each.
std::string CommandLineText(const std::vector<std::string>& argv);

}  // namespace gpulane
