#include "util/did_you_mean.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpulane {
namespace {

// "users.NAME" (a table of names) -> "users": the word a user types for it.
std::string Stem(const std::string& known) {
  constexpr std::string_view kName = ".NAME";
  const bool table = known.size() > kName.size() && known.compare(known.size() - kName.size(), kName.size(), kName) == 0;
  return table ? known.substr(0, known.size() - kName.size()) : known;
}

// "unknown key daemon.x" + ": did you mean daemon.y?" or " (known: a, b)"; `top`: the words are
// sections, written "[daemon]".
std::string Unknown(std::string what, std::string_view section, std::string_view word, const std::vector<std::string>& known) {
  std::vector<std::string> stems;
  for (const std::string& k : known) stems.push_back(Stem(k));
  const bool top = section.empty();
  const std::string nearest = NearestWord(word, stems);
  if (!nearest.empty())
    return fmt::format("{}: did you mean {}?", what, top ? fmt::format("[{}]", nearest) : fmt::format("{}.{}", section, nearest));
  if (known.empty()) return what;
  std::string list;
  for (const std::string& k : known) list += fmt::format("{}{}", list.empty() ? "" : ", ", top ? fmt::format("[{}]", k) : k);
  return fmt::format("{} ({}{})", what, top ? "the sections are " : "known: ", list);
}

}  // namespace

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string NearestWord(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() < 3 || word.size() > 64) return "";  // "-x": any short option is 1 edit away
  const std::size_t most = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  std::string best;
  std::size_t best_distance = most + 1;
  for (const std::string& c : candidates) {
    const std::size_t d = EditDistance(word, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  if (!best.empty()) return best;
  std::vector<const std::string*> begun;
  for (const std::string& c : candidates)
    if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) begun.push_back(&c);
  return begun.size() == 1 ? *begun.front() : "";
}

std::string UnknownKeyMessage(std::string_view section, std::string_view key, const std::vector<std::string>& known_keys) {
  const std::string what = section.empty() ? fmt::format("unknown key {}", key) : fmt::format("unknown key {}.{}", section, key);
  return Unknown(what, section, key, known_keys);
}

std::string UnknownSectionMessage(std::string_view name, const std::vector<std::string>& sections) {
  return Unknown(fmt::format("unknown section [{}]", name), "", name, sections);
}

}  // namespace gpulane
