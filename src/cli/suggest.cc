#include "cli/suggest.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>


namespace gpulane::cli {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps.
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

// "gpulane slurm gres-conf": the command line that reaches `app`.
std::string PathOf(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p; p = p->get_parent()) path = p->get_name() + " " + path;
  return path;
}

// Every spelling of every option of `sub` ("--gpus", "-g"), in the order --help lists them.
std::vector<std::string> OptionNames(CLI::App& sub) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : sub.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// The name of the option `word` spells: "--gpu=2" -> "--gpu", "-g2" -> "-g".
std::string OptionName(std::string_view word) {
  if (word.rfind("--", 0) == 0) return std::string(word.substr(0, word.find('=')));
  return std::string(word.substr(0, 2));
}

}  // namespace

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

CLI::App* FindSubcommand(CLI::App& app, std::string_view word) {
  auto found = app.get_subcommands([&](CLI::App* sub) { return sub->check_name(std::string(word)); });
  return found.empty() ? nullptr : found.front();
}

std::string UnknownCommandMessage(CLI::App& app, std::string_view word) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); }))
    if (sub->get_name().rfind('_', 0) != 0) names.push_back(sub->get_name());
  const std::string nearest = NearestWord(word, names);
  return fmt::format("unknown command '{}'{} ({} --help lists the commands)", word,
                     nearest.empty() ? "" : fmt::format(": did you mean {}?", nearest), PathOf(app));
}

std::string UnknownOptionMessage(CLI::App& sub, std::string_view word) {
  const std::string name = OptionName(word);
  std::string nearest;
  // Slurm's --time (-t) is gpulane's --time-limit: "--time" would otherwise read as its prefix only.
  if ((name == "-t" || name == "--time") && sub.get_option_no_throw("--time-limit")) nearest = "--time-limit";
  if (nearest.empty()) nearest = NearestWord(name, OptionNames(sub));
  return fmt::format("unknown option '{}' for {}{} ({} --help lists them)", name, PathOf(sub),
                     nearest.empty() ? "" : fmt::format(": did you mean {}?", nearest), PathOf(sub));
}

std::string UnknownOptionIn(CLI::App& app, const std::vector<std::string>& args) {
  auto letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  CLI::App* current = &app;
  for (const std::string& word : args) {
    if (word == "--") break;
    const bool option = word.size() >= 2 && word[0] == '-' && (letter(word[1]) || (word[1] == '-' && word.size() > 2 && letter(word[2])));
    if (!option) {
      if (CLI::App* sub = FindSubcommand(*current, word)) current = sub;
      continue;
    }
    const std::string name = OptionName(word);
    bool known = false;
    for (const CLI::App* a = current; a && !known; a = a->get_parent()) known = a->get_option_no_throw(name) != nullptr;
    if (!known) return UnknownOptionMessage(*current, word);
  }
  return "";
}

}  // namespace gpulane::cli
