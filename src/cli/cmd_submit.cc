// gpulane submit: queue a job (or an array of tasks) with the daemon; prints its id.
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <memory>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "util/exit_codes.h"
#include "cli/request_options.h"
#include "cli/slurm_jobs.h"
#include "cli/suggest.h"
#include "store/job.h"
#include "exec/command_check.h"
#include "exec/job_env.h"
#include "util/config.h"
#include "util/bytes_json.h"
#include "util/shell_words.h"
#include "util/strings.h"
#include "util/terminal_text.h"
#include "util/timing.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

struct SubmitOptions {
  RequestOptions request;
  std::string name, after, after_any, array, array_file, output, error, kill_grace, idempotency_key, retry, preemptible,
      notify;
  bool preemptible_given = false;  ///< --preemptible, with or without a value
  bool hold = false;
  std::string cluster;  ///< --cluster: "local", "slurm", or "" (submit.backend of the config)
  std::vector<std::string> command;
};

// The jobs of --after/--after-any: ids in the job id notation, separated by commas ("12,15_3").
Result<std::vector<store::JobRef>> ParseDeps(const std::string& text, const char* option) {
  std::vector<store::JobRef> deps;
  if (text.empty()) return deps;
  const auto ids = store::SplitJobIds(text);
  if (ids.empty()) return MakeError(ErrorKind::kInvalidArgument, fmt::format("{} '{}': give job ids, e.g. 12,15_3", option, text));
  for (const auto& id : ids) {
    auto refs = store::ParseJobRefs(id);
    if (!refs) return MakeError(ErrorKind::kInvalidArgument, fmt::format("{}: {}", option, refs.error().message));
    deps.insert(deps.end(), refs->begin(), refs->end());
  }
  return deps;
}

// --retry N: a whole number from 0 to store::kMaxRetries. Errors: kInvalidArgument naming the range.
Result<int> ParseRetries(const std::string& text) {
  int value = -1;
  const bool digits = !text.empty() && text.size() <= 3 && text.find_first_not_of("0123456789") == std::string::npos;
  if (digits) value = std::stoi(text);
  if (value < 0 || value > store::kMaxRetries)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("--retry '{}': give how many times to run a failed job again, from 0 to {}", text,
                                 store::kMaxRetries));
  return value;
}

// A fresh idempotency key: 128 random bits as 32 hex digits (getrandom). Errors: kIo.
Result<std::string> NewIdempotencyKey() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return MakeError(ErrorKind::kIo, fmt::format("cannot read random bytes for the submission's key: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
  std::string key;
  for (unsigned char b : bytes) key += fmt::format("{:02x}", b);
  return key;
}

// --array-file FILE: one task per command line. Sets the request's "array" (every command, or
// those --array names by position: 0 is the first command) and "array_argv", the spec's argv (the
// first task's command, which the spec must have) and its default name (the file's). Errors:
// kInvalidArgument naming the file and line, or the --array index that names no command.
Status AddArrayFile(const SubmitOptions& o, store::JobSpec& spec, nlohmann::json& request, std::vector<int>* indices) {
  auto commands = ReadCommandFile(o.array_file);
  if (!commands) return commands.error();
  if (o.array.empty()) {
    for (std::size_t i = 0; i < commands->size(); ++i) indices->push_back(static_cast<int>(i));
  } else {
    auto parsed = store::ParseTaskIndices(o.array);
    if (!parsed) return MakeError(ErrorKind::kInvalidArgument, fmt::format("--array '{}': {}", o.array, parsed.error().message));
    *indices = std::move(parsed).value();
    for (int i : *indices)
      if (static_cast<std::size_t>(i) >= commands->size())
        return MakeError(ErrorKind::kInvalidArgument,
                         fmt::format("--array {}: {} has {} commands, tasks 0 to {}; --array picks commands by "
                                     "their position in the file",
                                     i, o.array_file, commands->size(), commands->size() - 1));
  }
  nlohmann::json argv = nlohmann::json::array();
  for (int i : *indices) argv.push_back(BytesListToJson((*commands)[static_cast<std::size_t>(i)].argv));
  if (auto checked = store::ArrayArgvFromJson(argv, indices->size()); !checked) return checked.error();  // as the daemon would
  spec.argv = (*commands)[static_cast<std::size_t>(indices->front())].argv;
  if (o.name.empty()) spec.name = o.array_file == "-" ? "stdin" : o.array_file.substr(o.array_file.rfind('/') + 1);
  request["array"] = *indices;
  request["array_argv"] = std::move(argv);
  return Status::Ok();
}

// A command the job could not execute, found now by the submitting user (the job runs as them, in
// this directory and environment) rather than after its wait in the queue: prints the error and
// returns 127 or 126 (as a shell's), else kExitOk. Not for a job with dependencies (the job it
// follows may build its program) and not for --array-file (each task fails alone when it runs).
int RefuseUnrunnable(const SubmitOptions& o, const store::JobSpec& spec) {
  if (!o.after.empty() || !o.after_any.empty() || spec.argv.empty()) return kExitOk;
  auto problem = exec::CheckCommand(spec.argv.front(), spec.env.get(), spec.cwd);
  if (!problem) return kExitOk;
  PrintDiagnostic("error", problem->message + " (nothing was queued)");
  return problem->exit_code;
}

// submit --cluster slurm (or submit.backend = "slurm"): the same request, through sbatch
// (cli/slurm_jobs.h). Options that only gpulane's own daemon can honour are refused.
int RunSubmitSlurm(const SubmitOptions& o) {
  auto usage = [](std::string m) { return Fail(MakeError(ErrorKind::kInvalidArgument, std::move(m))); };
  const std::pair<bool, const char*> local_only[] = {
      {!o.array_file.empty(), "--array-file"}, {!o.kill_grace.empty(), "--kill-grace"}, {!o.retry.empty(), "--retry"},
      {o.preemptible_given, "--preemptible"}, {!o.notify.empty(), "--notify"}, {!o.idempotency_key.empty(), "--idempotency-key"}};
  for (const auto& given : local_only)
    if (given.first)
      return usage(fmt::format("{} is gpulane's own queue's: leave it out with --cluster slurm, or submit with "
                               "--cluster local",
                               given.second));
  if (o.command.empty()) return usage("no command given: put it after the options, e.g. gpulane submit --cluster slurm -g 1 -- python train.py");
  auto request = o.request.ToClusterRequest();
  if (!request) return Fail(request.error());
  SlurmSubmitArgs args{std::move(request).value(), o.name, o.after, o.after_any, o.array, o.output, o.error, o.hold, o.command};
  return SubmitToSlurm(args);
}

// The command comes once: after the options, or from --array-file. Errors: kInvalidArgument.
Status CheckCommandGiven(const SubmitOptions& o) {
  if (!o.array_file.empty() && !o.command.empty())
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("--array-file {} gives the commands: leave out the command '{}' after the options",
                                 o.array_file, EscapeForTerminal(o.command.front().substr(0, 40))));
  if (o.command.empty() && o.array_file.empty())
    return MakeError(ErrorKind::kInvalidArgument, "no command given: put it after the options, e.g. gpulane submit -g 1 -- python train.py");
  return Status::Ok();
}

// The job's spec from the options, the config and where and how it is submitted (directory,
// environment). Errors: kInvalidArgument for an option, those of the config, kIo.
Result<store::JobSpec> MakeSubmitSpec(const SubmitOptions& o) {
  auto usage = [](std::string m) { return MakeError(ErrorKind::kInvalidArgument, std::move(m)); };
  auto gpu_request = o.request.ToRequest();
  if (!gpu_request) return gpu_request.error();
  store::JobSpec spec;
  spec.request = std::move(gpu_request).value();
  if (!o.command.empty()) {
    spec.argv = o.command;
    spec.name = o.name.empty() ? o.command.front().substr(o.command.front().rfind('/') + 1) : o.name;
  } else {
    spec.name = o.name;  // the file's name unless --name (AddArrayFile)
  }
  auto after = ParseDeps(o.after, "--after");
  if (!after) return after.error();
  auto after_any = ParseDeps(o.after_any, "--after-any");
  if (!after_any) return after_any.error();
  spec.after_ok = *after;
  spec.after_any = *after_any;
  // As for `gpulane run`: --kill-grace, else run.kill_grace of the user's settings (their file over
  // the machine's), else 10 s. Sent explicitly, so the daemon's own settings do not replace it.
  auto config = LoadConfig();
  if (!config) return config.error();
  spec.kill_grace_s = config->kill_grace_s;
  if (!o.kill_grace.empty()) {
    auto s = ParseDurationS(o.kill_grace);
    if (!s) return usage("--kill-grace: " + s.error().message);
    spec.kill_grace_s = *s;
  }
  if (!o.retry.empty()) {
    auto retries = ParseRetries(o.retry);
    if (!retries) return retries.error();
    spec.retries = *retries;
  }
  if (o.preemptible_given) {
    auto preemptible = sched::ParsePreemptible(o.preemptible.empty() ? "requeue" : o.preemptible);
    if (!preemptible || *preemptible == sched::Preemptible::kNo)
      return usage(fmt::format("--preemptible={}: give requeue (the default: back in line, restarted with "
                               "GPULANE_PREEMPTED=1) or cancel", EscapeForTerminal(o.preemptible.substr(0, 40))));
    spec.request.preemptible = *preemptible;
  }
  if (!o.notify.empty()) {
    auto target = NotifyTargetOf(o.notify, *config);
    if (!target) return target.error();
    spec.notify = std::move(target).value();
  }
  spec.output_path = o.output;
  spec.error_path = o.error;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return MakeError(ErrorKind::kIo, "cannot read the current directory");
  spec.cwd = cwd;
  // The default log (gpulane-<id>.out) is created here, as the submitting user the job runs as: a
  // folder they cannot write would fail the job only after its wait in the queue.
  if (o.output.empty() && access(cwd, W_OK | X_OK) != 0)
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("cannot create the job's log gpulane-<id>.out in {}: {}: give -o PATH (a file you can "
                                 "write) or cd to a folder of yours (nothing was queued)",
                                 cwd, std::strerror(errno)));
  spec.env = exec::CurrentEnvironment();
  return spec;
}

// The daemon's "submit" request, with the array's task indices and the submission's key.
struct SubmitBody {
  nlohmann::json request;
  std::vector<int> indices;  // the array's tasks (none: one job)
  std::string key;
};

// The request for `spec` (whose command and name --array-file sets). Errors: kInvalidArgument for
// --array or --array-file, a spec over the daemon's limits, kIo for the key.
Result<SubmitBody> MakeSubmitBody(const SubmitOptions& o, store::JobSpec& spec) {
  SubmitBody body;
  body.request = {{"op", "submit"}, {"hold", o.hold}};
  if (!o.array_file.empty()) {
    if (Status added = AddArrayFile(o, spec, body.request, &body.indices); !added.ok()) return added.error();
  } else if (!o.array.empty()) {
    auto parsed = store::ParseTaskIndices(o.array);
    if (!parsed) return MakeError(ErrorKind::kInvalidArgument, fmt::format("--array '{}': {}", o.array, parsed.error().message));
    body.indices = std::move(parsed).value();
    body.request["array"] = body.indices;
  }
  if (Status within = store::CheckSpecLimits(spec); !within.ok()) return within.error();  // as the daemon would
  // The daemon answers a repeated key with the first submission's ids instead of queuing again,
  // so a submission sent again after a lost answer runs once (docs/protocol.md, "submit").
  body.key = o.idempotency_key;
  if (body.key.empty()) {
    auto fresh = NewIdempotencyKey();
    if (!fresh) return fresh.error();
    body.key = *fresh;
  }
  body.request["spec"] = store::SpecToJson(spec);
  body.request["idempotency_key"] = body.key;
  return body;
}

// The job's id on stdout; a repeated submission and an array's tasks said on stderr.
void PrintSubmitted(const SubmitOptions& o, const SubmitBody& body, nlohmann::json reply) {
  auto ids = reply["ids"].get<std::vector<std::int64_t>>();
  fmt::print("{}\n", ids.front());
  if (reply.value("repeated", false))
    Warn(fmt::format("idempotency key {}: submitted before as job {}; nothing new was queued", body.key, ids.front()));
  if (body.request.contains("array"))
    fmt::print(stderr, "gpulane: array job {}: {} tasks{}, {}_[{}] (job ids {}-{})\n", ids.front(), ids.size(),
               o.array_file.empty() ? "" : " from " + EscapeForTerminal(o.array_file), ids.front(),
               store::FormatTaskIndices(body.indices), ids.front(), ids.back());
}

int RunSubmit(const SubmitOptions& o) {
  {
    // --cluster, else submit.backend of the config (the user's file over the machine's), else local.
    auto config = LoadConfig();
    if (!config) return Fail(config.error());
    if ((o.cluster.empty() ? config->submit_backend : o.cluster) == "slurm") return RunSubmitSlurm(o);
  }
  if (Status given = CheckCommandGiven(o); !given.ok()) return Fail(given.error());
  auto spec = MakeSubmitSpec(o);
  if (!spec) return Fail(spec.error());
  if (int code = RefuseUnrunnable(o, *spec); code != kExitOk) return code;
  auto body = MakeSubmitBody(o, *spec);
  if (!body) return Fail(body.error());
  TimingMark("submit: request built");
  auto reply = CallOrStart(body->request);  // the one command that may start a per-user daemon
  if (!reply) return Fail(reply.error());
  PrintSubmitted(o, *body, std::move(reply).value());
  return kExitOk;
}

// What `gpulane submit` runs once CLI11 has parsed its command line: a usage error for an empty
// value, an unknown option or a word before --, else RunSubmit.
Runner SubmitRunner(CLI::App& sub, const std::shared_ptr<SubmitOptions>& o) {
  // An empty value ("--mem ''") is an error, not "not given" (as for gpulane run).
  for (const char* name : {"--name", "--after", "--after-any", "--array", "--array-file", "--output", "--error", "--kill-grace",
                           "--idempotency-key", "--retry"}) {
    const CLI::Option* opt = sub.get_option(name);
    if (opt->count() > 0 && (opt->results().empty() || opt->results().back().empty())) {
      std::string option = name;
      return [option] { return Fail(MakeError(ErrorKind::kInvalidArgument, fmt::format("{} '': give a value", option))); };
    }
  }
  o->preemptible_given = sub.get_option("--preemptible")->count() > 0;
  o->command = sub.remaining();
  // CLI11 stops at the first word it does not know (prefix_command): an unknown option is a usage
  // error naming the nearest option (`--time 1h`: --time-limit), not a command named "--time".
  if (!o->command.empty() && o->command.front().size() > 1 && o->command.front()[0] == '-') {
    const std::string message = UnknownOptionMessage(sub, o->command.front()) +
                                (TrailingCommandGiven() ? "" : "; a command that starts with '-' goes after --");
    return [message] { return Fail(MakeError(ErrorKind::kInvalidArgument, message)); };
  }
  if (TrailingCommandGiven()) {
    if (!o->command.empty()) {
      std::string stray = o->command.front();
      return [stray] {
        return Fail(MakeError(ErrorKind::kInvalidArgument,
                              fmt::format("'{}' before -- is not an option of gpulane submit; put the whole command after --", stray)));
      };
    }
    o->command = TrailingCommand();
  }
  return [o] { return RunSubmit(*o); };
}

}  // namespace

void RegisterSubmit(CLI::App& app, Runner* run, const os::Env&) {
  auto o = std::make_shared<SubmitOptions>();
  CLI::App* sub = app.add_subcommand("submit", "Queue a job with the daemon; prints its id: gpulane submit -g 1 -- python train.py");
  o->request.Register(sub, {.time_limit = true, .priority = true, .daemon_identifies = true, .zero_gpus = true});
  sub->add_option("--name", o->name, "A name for the job (default: the command's name)");
  sub->add_option("--after", o->after, "Start only after these jobs completed successfully (ids, comma-separated: 12 (an array: all its tasks), 12_3 (one task), 12_[1-3])")->type_name("JOBS");
  sub->add_option("--after-any", o->after_any, "Start only after these jobs ended, however (ids as for --after)")->type_name("JOBS");
  sub->add_option("--array", o->array, "Many tasks, each its own job on its own lease: 0-99, 1,3,5, 0-99:2; the task gets GPULANE_ARRAY_INDEX")
      ->type_name("INDICES");
  sub->add_option("--array-file", o->array_file,
                  "An array with one task per command line of FILE ('-': stdin), split into words as a shell would "
                  "but not run through one (write sh -c '...' for pipes and redirections); blank lines and # comments "
                  "are skipped; task i runs the i-th command (--array picks some of them)")
      ->type_name("FILE");
  sub->add_option("-o,--output", o->output,
                  "stdout log, appended to (%j job id, %a array index, %A array id, %u user); default: a new file "
                  "gpulane-%j.out, or gpulane-%j.1.out, .2 ... when that name is taken (gpulane show prints it)")
      ->type_name("PATH");
  sub->add_option("-e,--error", o->error, "stderr log, appended to (default: with stdout)")->type_name("PATH");
  sub->add_option("--kill-grace", o->kill_grace, "Time between SIGTERM and SIGKILL for what the job leaves behind (default: run.kill_grace of the config, else 10s)")->type_name("DURATION");
  sub->add_option("--notify", o->notify,
                  "Tell me when the job ends, fails or has an anomaly (end, fail, anomaly; e.g. end,anomaly): "
                  "to notify.webhook and/or notify.command of your config")
      ->type_name("EVENTS");
  sub->add_option("--retry", o->retry,
                  "Run the job again when it fails (a non-zero exit, or it could not start), at most N times (0-100, "
                  "default 0); not after a cancel or a timeout. The job gets GPULANE_RETRY=0, 1, ...")
      ->type_name("N");
  sub->add_option("--preemptible", o->preemptible,
                "Use any idle GPU, also one reserved for a waiting job or in a closed partition, and give way when a "
                "job that is not preemptible needs it: SIGTERM, the kill grace, SIGKILL, then back in line "
                "(--preemptible=cancel: ended); restarted with GPULANE_PREEMPTED=1")
      ->expected(0, 1)
      ->type_name("[=requeue|cancel]");
  sub->add_option("--cluster", o->cluster,
                  "Where the job goes: local (this machine's gpulane daemon) or slurm (sbatch; the job runs under "
                  "gpulane run inside its allocation; its id is slurm:ID). Default: submit.backend of the config, else local")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->type_name("local|slurm");
  sub->add_flag("--hold", o->hold, "Queue it held: it starts only after 'gpulane release'");
  sub->add_option("--idempotency-key", o->idempotency_key,
                  "Name this submission (1-128 letters, digits, - _ . :): submitting again with the same key queues "
                  "nothing and prints the first submission's id (default: a random key of each submit)")
      ->type_name("KEY");
  sub->prefix_command();
  sub->allow_extras();
  sub->footer("A command that cannot be executed (looked up in your PATH, from this directory) is refused before it "
              "is queued: exit 127 (not found) or 126 (not executable); not for a job with --after or --after-any, "
              "whose dependency may build it.");
  sub->callback([o, sub, run] { *run = SubmitRunner(*sub, o); });
}

}  // namespace gpulane::cli
