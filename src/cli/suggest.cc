#include "cli/suggest.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

#include "util/did_you_mean.h"

namespace gpulane::cli {
namespace {

// Words other tools use for what gpulane names otherwise, and where gpulane has it. Only words no
// command is near (NearestWord's suggestion comes first: "stat" gets status, "squeue" queue).
struct OtherToolsWord {
  std::string_view word;
  std::string_view where;
};
constexpr OtherToolsWord kOtherToolsWords[] = {
    {"history", "finished jobs are in 'gpulane queue --all', their use in 'gpulane report --by job'"},
    {"jobs", "the queued and running jobs are in 'gpulane queue'"},
    {"ps", "the queued and running jobs are in 'gpulane queue'"},
    {"ls", "the queued and running jobs are in 'gpulane queue'"},
    {"kill", "'gpulane cancel JOB' cancels a job, queued or running"},
    {"rm", "'gpulane cancel JOB' cancels a job, queued or running"},
    {"nvidia-smi", "'gpulane status' shows every GPU, its load and who uses it"},
    {"gpustat", "'gpulane status' shows every GPU, its load and who uses it"},
    {"sbatch", "'gpulane submit -g N -- COMMAND' queues a job"},
};

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

CLI::App* FindSubcommand(CLI::App& app, std::string_view word) {
  auto found = app.get_subcommands([&](CLI::App* sub) { return sub->check_name(std::string(word)); });
  return found.empty() ? nullptr : found.front();
}

std::string UnknownCommandMessage(CLI::App& app, std::string_view word) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); }))
    if (sub->get_name().rfind('_', 0) != 0) names.push_back(sub->get_name());
  std::string hint;
  if (const std::string nearest = NearestWord(word, names); !nearest.empty()) hint = fmt::format(": did you mean {}?", nearest);
  for (const OtherToolsWord& other : kOtherToolsWords)
    if (hint.empty() && !app.get_parent() && word == other.word) hint = fmt::format(": {}", other.where);
  return fmt::format("unknown command '{}'{} ({} --help lists the commands)", word, hint, PathOf(app));
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

namespace gpulane::cli {
namespace {

// The deepest subcommand `args` name (before any "--"), `app` itself when none.
CLI::App* CommandOf(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* current = &app;
  for (const std::string& word : args) {
    if (word == "--") break;
    if (CLI::App* sub = FindSubcommand(*current, word)) current = sub;
  }
  return current;
}

// CLI11's "Could not convert: --gpu-count = two": the option as the user typed it (-g) and what it
// takes; "" when `what` is not that message.
std::string ConversionMessage(CLI::App& app, const std::vector<std::string>& args, std::string_view what) {
  constexpr std::string_view kPrefix = "Could not convert: ";
  const std::size_t eq = what.find(" = ");
  if (what.rfind(kPrefix, 0) != 0 || eq == std::string_view::npos) return "";
  const std::string name(what.substr(kPrefix.size(), eq - kPrefix.size()));
  const std::string value(what.substr(eq + 3));
  CLI::App* command = CommandOf(app, args);
  std::string typed = name, type = "value";
  for (const std::string& word : args) {
    if (word == "--") break;
    if (word.size() < 2 || word[0] != '-') continue;
    for (const CLI::App* a = command; a; a = a->get_parent()) {
      const CLI::Option* option = a->get_option_no_throw(OptionName(word));
      if (!option || !option->check_name(name)) continue;
      typed = OptionName(word);
      type = option->get_type_name();
    }
  }
  const std::string help = fmt::format("gpulane {} --help", command->get_name());
  if (type == "N") return fmt::format("{} {}: give a whole number, e.g. {} 2 ({})", typed, value, typed, help);
  return fmt::format("{} {}: not a valid {} ({})", typed, value, type, help);
}

// CLI11's "job is required" (a job command without its id): which command needs what, by example.
std::string RequiredMessage(CLI::App& app, const std::vector<std::string>& args, std::string_view what) {
  if (what != "job is required" && what != "jobs is required") return "";
  const std::string command = CommandOf(app, args)->get_name();
  return fmt::format("gpulane {0} needs a job id, e.g. gpulane {0} 12", command);
}

// Usage lines that show the command after "--" (CLI11 2.1 has no setter for a usage line).
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = CLI::Formatter::make_usage(app, std::move(name));
    const std::string command = app->get_name();
    if ((command == "run" || command == "submit") && !usage.empty() && usage.back() == '\n')
      usage.insert(usage.size() - 1, " [-- COMMAND [ARGS...]]");
    return usage;
  }
};

}  // namespace

std::string ParseErrorMessage(CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e) {
  std::string message = dynamic_cast<const CLI::ExtrasError*>(&e) ? UnknownOptionIn(app, args) : "";
  if (message.empty()) message = ConversionMessage(app, args, e.what());
  if (message.empty()) message = RequiredMessage(app, args, e.what());
  return message.empty() ? fmt::format("{}; see 'gpulane --help'", e.what()) : message;
}

std::shared_ptr<CLI::FormatterBase> MakeUsageFormatter() { return std::make_shared<UsageFormatter>(); }

}  // namespace gpulane::cli
