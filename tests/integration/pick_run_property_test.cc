// pick ≡ run --no-wait (issue 8): for any machine state and options, `gpulane pick` prints exactly
// the GPUs that `gpulane run --no-wait` with the same options is granted, and fails exactly when it
// fails, with the same exit code and the same reason.
//
// PickRunProperty.AgreeOnRandomStates checks that over random states (GPULANE_PROPERTY_STATES, default
// 1000) from a random seed (GPULANE_PROPERTY_SEED to replay one; GPULANE_PROPERTY_STATE=i to replay
// and show only the i-th state of it; GPULANE_PROPERTY_SHOW=text to show the first states whose
// answer says `text`): a random machine (1-8 GPUs cloned from the recorded H200 with random
// free memory, utilisation, compute modes, failed and MIG GPUs, unreported values, NVLinks and
// processes), random live leases and tickets in the lease directory (planted files the test holds
// locked, their jobs' processes a fixed pool of `sleep`s in the process-tree shapes leases own) and
// random request options, the same for both commands. The fixed cases below (PickRunAgree.*) show the
// situations the random ones found worth writing down, with the answer both commands must give.
//
// One difference is allowed: pick alone warns about an entry of the inherited CUDA_VISIBLE_DEVICES
// that ends the list (IsPickOnlyWarning). Two disagreements this test found outside what the random
// states vary have fixed cases of their own: a ticket at the largest seq, and an unsafe or
// uncreatable lease directory. Neither the daemon's snapshots (GPULANE_DIRECT_NVML=1 here) nor changes between the two
// commands are part of the property.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "support/harness.h"
#include "support/planted.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/units.h"

namespace gpulane::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
constexpr std::uint32_t kPropertyNobody = 65534;

// ---- The helper processes, started once and reused by every state ------------------------------

// Every pid a state may put on a GPU or into a lease, and what it is (for failure reports).
class Pool {
 public:
  static constexpr unsigned kJobs = 5;   ///< supervisor + child trees that leases may own
  static constexpr unsigned kOwn = 3;    ///< the test user's processes outside gpulane
  static constexpr unsigned kOutside = 4;  ///< pids of another PID namespace

  Pool() {
    for (unsigned i = 0; i < kJobs; ++i) jobs_.push_back(std::make_unique<JobTree>());
    for (unsigned i = 0; i < kOwn; ++i) own_.push_back(std::make_unique<SleepProcess>());
    if (geteuid() == 0) other_ = std::make_unique<SleepProcess>(kPropertyNobody);
  }

  std::uint32_t supervisor(unsigned j) const { return jobs_[j]->supervisor(); }
  std::uint32_t job_child(unsigned j) const { return jobs_[j]->child(); }
  std::uint32_t own(unsigned i) const { return own_[i]->pid(); }
  /// Another user's process: a sleep of nobody's (as root), else pid 1 (normally root's).
  std::uint32_t other_user() const { return other_ ? other_->pid() : 1; }
  std::uint32_t zombie() const { return zombie_.pid(); }
  static std::uint32_t outside(unsigned k) { return PidOutsideThisNamespace(k); }

  /// What `pid` is, for people reading a failure.
  std::string Describe(std::uint32_t pid) const {
    for (unsigned j = 0; j < kJobs; ++j) {
      if (pid == supervisor(j)) return fmt::format("job tree {}'s supervisor (own process group {})", j, pid);
      if (pid == job_child(j))
        return fmt::format("job tree {}'s child (parent {}, own process group {})", j, supervisor(j), pid);
    }
    for (unsigned i = 0; i < kOwn; ++i)
      if (pid == own(i)) return fmt::format("the test user's sleep {} (the test's process group)", i);
    if (pid == other_user()) return "another user's process";
    if (pid == zombie()) return "a zombie (ended, not reaped)";
    for (unsigned k = 0; k < kOutside; ++k)
      if (pid == outside(k)) return "a pid of another PID namespace (no such process here)";
    if (pid == static_cast<std::uint32_t>(getpid())) return "the test process (parent of its own sleeps)";
    if (pid == static_cast<std::uint32_t>(getpgrp())) return "the test's process group (its own sleeps')";
    return "?";
  }

 private:
  std::vector<std::unique_ptr<JobTree>> jobs_;
  std::vector<std::unique_ptr<SleepProcess>> own_;
  std::unique_ptr<SleepProcess> other_;
  Zombie zombie_;
};

// ---- One state --------------------------------------------------------------------------------

// A lease or ticket file, held locked by the test as its holder would.
struct Record {
  json content;
  bool other_user = false;  ///< owned by another user (nobody) instead of the test's user (root only)
};

struct Scenario {
  json state;                                  ///< the fake NVML state
  std::vector<Record> leases, tickets;         ///< live, in the lease directory
  std::vector<std::string> stale;              ///< lease files nobody holds (they would block every GPU)
  std::vector<std::string> damaged;            ///< locked lease files that are no record
  std::optional<std::string> config;           ///< GPULANE_CONFIG's content (nullopt: an empty file)
  std::string nvml_variant = "current";        ///< which fake libnvidia-ml.so.1 (older drivers lack symbols)
  std::vector<std::string> options;            ///< the request options, the same for both commands
  std::optional<std::string> visible_devices;  ///< the inherited CUDA_VISIBLE_DEVICES (nullopt: unset)
  Env env;                                     ///< more environment for both (fixed cases)
};

struct Outcome {
  RunResult pick, run;
};

std::vector<std::string> PickArgs(const Scenario& s) {
  std::vector<std::string> args{"pick"};
  args.insert(args.end(), s.options.begin(), s.options.end());
  return args;
}

std::vector<std::string> RunArgs(const Scenario& s) {
  std::vector<std::string> args{"run", "--no-wait", "-q"};
  args.insert(args.end(), s.options.begin(), s.options.end());
  args.insert(args.end(), {"--", "printenv", "CUDA_VISIBLE_DEVICES"});
  return args;
}

// Sets the machine to `s` (NVML state, leases, tickets), runs pick, then run on the same state,
// and checks that run left nothing of its own behind.
class Bench {
 public:
  Bench() : machine_(RecordedH200x2(UnusedPid())) {}

  Outcome Run(const Scenario& s) {
    planted_.clear();
    machine_.state() = s.state;
    machine_.Save();
    const fs::path config = machine_.dir() / "config.toml";
    if (s.config) std::ofstream(config) << *s.config;
    else std::ofstream(config, std::ios::trunc);  // empty: no settings
    std::set<std::string> names;  // what the lease directory holds after both commands
    auto plant = [&](PlantedFile file, bool other_user) {
      if (other_user) file.GiveTo(kPropertyNobody);
      names.insert(planted_.emplace_back(std::move(file)).path().filename());
    };
    for (const Record& l : s.leases) plant(PlantLease(leases(), l.content), l.other_user);
    for (const Record& t : s.tickets) plant(PlantTicket(leases(), t.content), t.other_user);
    for (const std::string& d : s.damaged) plant(PlantedFile(leases() / fmt::format("r{}.damaged{}.lease", names.size(), names.size()), d), false);
    for (std::size_t i = 0; i < s.stale.size(); ++i)  // the first command removes them: its own, unlocked
      std::ofstream(leases() / fmt::format("r{}.stale{:03}.lease", 90000 + i, i)) << s.stale[i];
    Env env = machine_.env();
    env["GPULANE_CONFIG"] = config.string();
    env["GPULANE_NVML_LIBRARY"] = FakeNvmlLibrary(s.nvml_variant);
    env["GPULANE_DIRECT_NVML"] = "1";
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    if (s.visible_devices) env["CUDA_VISIBLE_DEVICES"] = *s.visible_devices;
    for (const auto& [k, v] : s.env) env[k] = v;
    Outcome o;
    o.pick = RunGpulane(PickArgs(s), env);
    o.run = RunGpulane(RunArgs(s), env);
    std::set<std::string> left;
    for (const auto& e : fs::directory_iterator(leases())) {
      const std::string name = e.path().filename();
      if (Contains(name, ".stale")) fs::remove(e.path());  // left when both refused the options before reading
      else left.insert(name);
    }
    EXPECT_EQ(left, names) << "run's own lease and ticket end with it; the planted files stay";
    return o;
  }

  fs::path leases() const { return machine_.dir() / "leases"; }

 private:
  FakeMachine machine_;
  std::vector<PlantedFile> planted_;
};

// The lines pick prints on stderr that run does not: its warning about entries of the inherited
// CUDA_VISIBLE_DEVICES that end the list (run takes the same GPUs from it, silently).
bool IsPickOnlyWarning(const std::string& line) {
  return line.rfind("gpulane: warning: CUDA_VISIBLE_DEVICES='", 0) == 0;
}

// Both granted the same GPUs, or both failed with the same exit code and the same one error line.
::testing::AssertionResult Agree(const Outcome& o) {
  std::vector<std::string> pick_err;
  for (const std::string& line : Lines(o.pick.err))
    if (!IsPickOnlyWarning(line)) pick_err.push_back(line);
  const std::vector<std::string> run_err = Lines(o.run.err);
  bool ok;
  if (o.pick.exit_code == 0) {
    ok = o.run.exit_code == 0 && LineCount(o.pick.out) == 1 && o.pick.out.size() > 1 && o.run.out == o.pick.out &&
         pick_err.empty() && run_err.empty();
  } else {
    ok = o.run.exit_code == o.pick.exit_code && o.pick.out.empty() && o.run.out.empty() && pick_err.size() == 1 &&
         pick_err[0].rfind("gpulane: error: ", 0) == 0 && run_err == pick_err;
  }
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "pick and run --no-wait disagree";
}

std::string Show(const RunResult& r) {
  return fmt::format("exit {}\n    stdout: {}\n    stderr: {}", r.exit_code, json(r.out).dump(), json(r.err).dump());
}

std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string CommandLine(const Scenario& s, const std::vector<std::string>& args) {
  std::string out;
  for (const auto& [k, v] : s.env) out += k + "=" + ShellQuote(v) + " ";
  if (s.visible_devices) out += "CUDA_VISIBLE_DEVICES=" + ShellQuote(*s.visible_devices) + " ";
  out += "gpulane";
  for (const auto& a : args) out += " " + ShellQuote(a);
  return out;
}

// Everything needed to understand a disagreement without replaying it.
std::string Report(const Scenario& s, const Outcome& o, const Pool* pool) {
  std::ostringstream out;
  out << "GPUs (NVML order; gpulane numbers them by PCI bus ID; noise fields left out):\n";
  std::set<std::uint32_t> pids;
  for (json d : s.state["devices"]) {
    for (const char* noise : {"name", "temp_c", "power_mw", "power_limit_mw", "fan", "pstate", "persistence",
                              "clock_sm", "clock_mem", "throttle", "minor"})
      d.erase(noise);
    if (d.contains("processes") && d["processes"].is_array())
      for (const auto& p : d["processes"]) pids.insert(p["pid"].get<std::uint32_t>());
    out << "  " << d.dump() << "\n";
  }
  const std::string me = UserName(geteuid()), nobody = UserName(kPropertyNobody);
  out << "leases:\n";
  for (const Record& l : s.leases) {
    out << "  " << (l.other_user ? nobody : me) << "'s " << l.content.dump() << "\n";
    pids.insert(l.content["pid"].get<std::uint32_t>());
    if (l.content["pgid"].get<std::uint32_t>()) pids.insert(l.content["pgid"].get<std::uint32_t>());
  }
  std::vector<Record> line = s.tickets;
  std::stable_sort(line.begin(), line.end(), [](const Record& a, const Record& b) {
    const int pa = a.content["request"]["priority"], pb = b.content["request"]["priority"];
    return pa != pb ? pa > pb : a.content["seq"].get<std::uint64_t>() < b.content["seq"].get<std::uint64_t>();
  });
  out << "tickets, in line order (priority, then seq):\n";
  for (const Record& t : line) out << "  " << (t.other_user ? nobody : me) << "'s " << t.content.dump() << "\n";
  for (const std::string& d : s.damaged) out << "  damaged, locked lease file: " << json(d).dump() << "\n";
  for (const std::string& d : s.stale) out << "  stale (unlocked) lease file: " << d << "\n";
  if (s.config) out << "config file:\n" << *s.config;
  if (s.nvml_variant != "current") out << "fake NVML variant: " << s.nvml_variant << "\n";
  if (s.state.contains("init_error")) out << "nvmlInit fails: " << s.state["init_error"] << "\n";
  out << "pids:\n";
  for (std::uint32_t pid : pids) out << "  " << pid << ": " << (pool ? pool->Describe(pid) : "?") << "\n";
  out << "$ " << CommandLine(s, PickArgs(s)) << "\n    " << Show(o.pick) << "\n";
  out << "$ " << CommandLine(s, RunArgs(s)) << "\n    " << Show(o.run) << "\n";
  return out.str();
}

// ---- The generator ------------------------------------------------------------------------------

class Generator {
 public:
  Generator(std::uint64_t seed, std::uint64_t index, const Pool& pool, const json& base_gpu, std::uint64_t now_ns)
      : pool_(pool), base_(base_gpu), now_ns_(now_ns), total_(base_gpu["memory"]["total"].get<std::uint64_t>()) {
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                      static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32)};
    rng_.seed(seq);
  }

  Scenario Make() {
    Scenario s;
    s.state = RecordedH200x2(UnusedPid());
    s.state["devices"] = Gpus();
    for (unsigned i = 0, n = Weighted({40, 25, 18, 10, 7}); i < n; ++i)
      s.leases.push_back({Lease(s.state["devices"]), OtherUser()});
    ExtraProcesses(s.state["devices"]);
    for (unsigned i = 0, n = Weighted({40, 25, 18, 10, 7}); i < n; ++i) s.tickets.push_back({Ticket(), OtherUser()});
    if (Chance(0.08)) s.stale.push_back(EveryGpuLease(s.state["devices"]).dump());
    if (Chance(0.04)) s.damaged.push_back(OneOf<std::string>({"{not json", "[1, 2]", R"({"job_id": "r1", "gpus": "all"})"}));
    if (geteuid() == 0 && Chance(0.3))  // only root's own file may set the margin
      s.config = fmt::format("[lease]\nmemory_margin = \"{}\"\n", OneOf({"0B", "1B", "512MiB", "1GiB", "2GiB", "10GiB"}));

    s.options = Options();
    s.nvml_variant = OneOf({"current", "current", "current", "current", "current", "current", "current", "current",
                            "no_v3", "legacy"});
    if (Chance(0.01)) s.state["init_error"] = OneOf({9, 18});
    if (Chance(0.1)) s.options.push_back("--uuid");
    if (Chance(0.15)) s.visible_devices = VisibleDevices();
    // In NVML's order, which need not be PCI order.
    if (Chance(0.3)) std::shuffle(s.state["devices"].begin(), s.state["devices"].end(), rng_);
    return s;
  }

 private:
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  unsigned Int(unsigned lo, unsigned hi) { return std::uniform_int_distribution<unsigned>(lo, hi)(rng_); }
  std::uint64_t Int64(std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng_); }
  // An index drawn with the given weights.
  unsigned Weighted(std::initializer_list<double> weights) {
    return static_cast<unsigned>(std::discrete_distribution<unsigned>(weights)(rng_));
  }
  template <typename T>
  T OneOf(std::initializer_list<T> values) {
    return *(values.begin() + Int(0, static_cast<unsigned>(values.size() - 1)));
  }
  std::string Uuid(unsigned pci) const { return MakeUuid(0xb0000000u + pci); }

  // Free memory of a GPU: all or nearly all of it often, little (below the 1 GiB margin and
  // around it) now and then, anything in between.
  std::uint64_t FreeSize() {
    switch (Weighted({25, 10, 8, 8, 10, 14, 25})) {
      case 0: return total_;
      case 1: return total_ - OneOf<std::uint64_t>({1, 648347648, kGiB, kGiB + 1});
      case 2: return OneOf<std::uint64_t>({0, Int(1, 1023) * kMiB});
      case 3: return kGiB + OneOf<std::uint64_t>({0, 1, kMiB, 512 * kMiB});
      case 4: return OneOf<std::uint64_t>({2, 3, 5}) * kGiB;
      case 5: return OneOf<std::uint64_t>({19, 20, 21, 40, 70, 100}) * kGiB;
      default: return Int64(0, total_);
    }
  }

  // Memory asked for (--mem, --min-free, a ticket's, a lease's): mostly what jobs ask, sometimes
  // exactly a GPU's free memory here or one byte or the margin either side of it, rarely more than
  // a GPU holds.
  std::uint64_t AskedSize() {
    switch (Weighted({10, 25, 20, 12, 15, 10, 8})) {
      case 0: return Int(1, 1023) * kMiB;
      case 1: return OneOf<std::uint64_t>({1, 2, 3, 5, 8}) * kGiB;
      case 2: return OneOf<std::uint64_t>({19, 20, 21, 30}) * kGiB;
      case 3: return OneOf<std::uint64_t>({40, 70, 100}) * kGiB;
      case 4: {
        const std::uint64_t f = free_[Int(0, static_cast<unsigned>(free_.size() - 1))];
        const std::uint64_t delta = OneOf<std::uint64_t>({0, 1, kGiB, kGiB + 1});
        return Chance(0.5) || f < delta ? f + delta : f - delta;
      }
      case 5: return Int64(0, total_);
      default: return total_ + OneOf<std::int64_t>({-static_cast<std::int64_t>(kGiB) - 1, -static_cast<std::int64_t>(kGiB), 0, 1, 1LL << 30});
    }
  }

  // As a user types it: GiB, MiB or bytes.
  std::string SizeText(std::uint64_t bytes) {
    if (bytes % kGiB == 0 && Chance(0.7)) return fmt::format("{}{}", bytes / kGiB, OneOf({"GiB", "G", "GB", "gib"}));
    if (bytes % (kGiB / 2) == 0 && Chance(0.5)) return fmt::format("{}.5GiB", bytes / kGiB);
    if (bytes % kMiB == 0 && Chance(0.5)) return fmt::format("{}MiB", bytes / kMiB);
    return fmt::format("{}B", bytes);
  }

  json Gpus() {
    const unsigned n = Int(1, 8);
    std::set<unsigned> buses;
    while (buses.size() < n) buses.insert(Int(0x01, 0xfe));
    json devices = json::array();
    free_.clear();
    unsigned pci = 0;
    for (unsigned bus : buses) {  // ascending: PCI order
      json d = CloneGpu(base_, Uuid(pci), fmt::format("00000000:{:02X}:00.0", bus), pci);
      const std::uint64_t free = FreeSize();
      SetFreeMemory(d, free);
      free_.push_back(free);
      if (Chance(0.15)) RefuseCall(d, "nvmlDeviceGetUtilizationRates", OneOf({3, 4}));
      else SetUtilization(d, OneOf<unsigned>({0, 0, 5, 49, 50, 51, 99, 100, Int(0, 100)}));
      switch (Weighted({88, 5, 3, 2, 2})) {
        case 1: d["compute_mode"] = 3; break;  // EXCLUSIVE_PROCESS
        case 2: d["compute_mode"] = 2; break;  // PROHIBITED
        case 3: d["compute_mode"] = 1; break;  // EXCLUSIVE_THREAD
        case 4: RefuseCall(d, "nvmlDeviceGetComputeMode", 3); break;
        default: break;
      }
      switch (Weighted({92, 2, 2, 2, 1.5, 0.5})) {
        case 1: d["error"] = 15; break;  // lost: every call fails
        case 2:                          // MIG enabled, one MIG device
          d["mig"] = json::array({1, 1});
          RefuseCall(d, "nvmlDeviceGetUtilizationRates", 3);
          d["mig_devices"] = json::array({{{"uuid", MigUuid(pci)}, {"gi", 1}, {"ci", 0},
                                           {"memory", {{"total", total_ / 2}, {"used", 0}}},
                                           {"processes", json::array()}}});
          if (Chance(0.5)) AddProcess(d["mig_devices"][0], pool_.own(Int(0, Pool::kOwn - 1)), 2 * kGiB);
          break;
        case 3: d["processes"] = "ERR:NVMLError_NoPermission:Insufficient Permissions"; break;  // unknown
        case 4: d.erase("memory"); break;  // not reported
        case 5: d["handle_error"] = OneOf({15, 999}); break;  // no handle for this index
        default: break;
      }
      devices.push_back(std::move(d));
      ++pci;
    }
    const double link = OneOf({0.0, 0.3, 0.7, 1.0});
    for (unsigned a = 0; a < n; ++a)
      for (unsigned b = a + 1; b < n; ++b)
        if (Chance(link)) LinkGpus(devices[a], devices[b], Int(1, 18));
    return devices;
  }

  // Owned by another user now and then (only root can give a file away).
  bool OtherUser() { return geteuid() == 0 && Chance(0.2); }

  // What a stale file holds: a lease of every GPU, which would block them all if it were live.
  json EveryGpuLease(const json& devices) {
    json gpus = json::array();
    for (unsigned i = 0; i < devices.size(); ++i) gpus.push_back({{"uuid", Uuid(i)}});
    return {{"job_id", "r1"}, {"pid", pool_.supervisor(0)}, {"pgid", 0}, {"command", "gone"}, {"gpus", gpus}};
  }

  static std::string MigUuid(unsigned pci) { return "MIG-" + MakeUuid(0xc0000000u + pci).substr(4); }

  // Adds a process unless the GPU's process list is not reported.
  void Process(json& device, std::uint32_t pid) {
    if (device.contains("processes") && !device["processes"].is_array()) return;
    if (Chance(0.05)) {  // used memory "not available"
      device["processes"].push_back({{"pid", pid}});
      return;
    }
    AddProcess(device, pid, OneOf<std::uint64_t>({0, 512 * kMiB, 2 * kGiB, 10 * kGiB, AskedSize()}));
  }

  // Any pid of the pool, or of no process here.
  std::uint32_t AnyPid() {
    switch (Weighted({25, 10, 15, 8, 21, 21})) {
      case 0: return pool_.own(Int(0, Pool::kOwn - 1));
      case 1: return pool_.other_user();
      case 2: return Pool::outside(Int(0, Pool::kOutside - 1));
      case 3: return pool_.zombie();
      case 4: return pool_.supervisor(Int(0, Pool::kJobs - 1));
      default: return pool_.job_child(Int(0, Pool::kJobs - 1));
    }
  }

  // A live lease of some GPUs, exclusive or with declared memory; its job's processes on some of
  // them (owned through the lease's pid as their ancestor, or its pgid as their group, or not at
  // all: then they are foreign), rarely also on a GPU it did not lease.
  json Lease(json& devices) {
    const unsigned n = static_cast<unsigned>(devices.size());
    const unsigned j = Int(0, Pool::kJobs - 1);
    // Rarely the test itself, the parent of its own sleeps, or its process group, theirs.
    const std::uint32_t test = static_cast<std::uint32_t>(getpid()), test_group = static_cast<std::uint32_t>(getpgrp());
    const std::uint32_t pid = Chance(0.03) ? test : Chance(0.6) ? pool_.supervisor(j) : Pool::outside(Int(0, Pool::kOutside - 1));
    const std::uint32_t pgid = Chance(0.03) ? test_group : OneOf<std::uint32_t>({0, pool_.supervisor(j), pool_.job_child(j)});
    std::vector<unsigned> gpus(n);
    for (unsigned i = 0; i < n; ++i) gpus[i] = i;
    std::shuffle(gpus.begin(), gpus.end(), rng_);
    gpus.resize(Int(1, std::min(n, 3u)));
    std::optional<std::uint64_t> mem;
    if (Chance(0.4)) mem = std::max<std::uint64_t>(1, AskedSize());
    json leased = json::array();
    for (unsigned g : gpus) {
      json e = {{"uuid", Uuid(g)}};
      if (mem) e["mem_bytes"] = *mem;
      leased.push_back(e);
      if (Chance(0.5)) Process(devices[g], Chance(0.5) ? pool_.supervisor(j) : pool_.job_child(j));
    }
    if (Chance(0.05)) leased.push_back({{"uuid", MakeUuid(0xdead0000u)}});  // a GPU not here (gone)
    if (Chance(0.1)) Process(devices[Int(0, n - 1)], Chance(0.5) ? pool_.supervisor(j) : pool_.job_child(j));
    const std::string job_id = Chance(0.5) ? fmt::format("r{}", pid) : std::to_string(Int(1, 999));
    return {{"job_id", job_id}, {"user", "planted"}, {"pid", pid}, {"pgid", pgid}, {"command", "python train.py"},
            {"gpus", leased}, {"started_s", 1.7e9}};
  }

  void ExtraProcesses(json& devices) {
    for (auto& d : devices)
      for (unsigned k = 0; k < 3 && Chance(0.25); ++k) Process(d, AnyPid());
  }

  // A request waiting in line: before the newcomer (priority 1, or 0), or after it (-1).
  json Ticket() {
    const unsigned n = static_cast<unsigned>(free_.size());
    json r = {{"count", Chance(0.07) ? Int(n + 1, n + 2) : Int(1, std::min(n, 3u))},
              {"share_foreign", Chance(0.3)},
              {"order", OneOf({"memory", "util", "pci"})},
              {"priority", OneOf({-1, 0, 0, 1})},
              {"gpu_list", ""},
              {"submit_time_s", 1.7e9}};
    if (Chance(0.3)) r["mem_bytes"] = std::max<std::uint64_t>(1, AskedSize());
    if (Chance(0.2)) r["min_free_bytes"] = AskedSize();
    if (Chance(0.2)) r["max_util_pct"] = OneOf<unsigned>({0, 50, 100});
    if (Chance(0.4)) {
      json allowed = json::array();
      for (unsigned i = 0; i < n; ++i)
        if (Chance(0.5)) allowed.push_back(Uuid(i));
      r["allowed_uuids"] = allowed;
    }
    if (Chance(0.02)) r["count"] = 0;  // damaged: no ticket at all for either command
    std::uint64_t seq;
    switch (Weighted({80, 10, 10})) {
      case 1: seq = now_ns_ + 3600ULL * 1000000000ULL; break;  // a clock ahead of this one
      case 2: seq = Int(1, 1000); break;
      default: seq = now_ns_ - Int64(1, 3600ULL * 1000000000ULL); break;
    }
    return {{"seq", seq}, {"pid", Chance(0.5) ? pool_.own(Int(0, Pool::kOwn - 1)) : pool_.supervisor(Int(0, Pool::kJobs - 1))},
            {"request", r}};
  }

  // GPU `i` as --gpus or CUDA_VISIBLE_DEVICES name it: index, UUID, UUID prefix, or (rarely) an
  // entry that names no GPU.
  std::string GpuEntry(unsigned i, bool allow_bad) {
    const unsigned n = static_cast<unsigned>(free_.size());
    switch (Weighted({60, 15, 10, allow_bad ? 4.0 : 0.0, allow_bad ? 4.0 : 0.0, allow_bad ? 3.0 : 0.0})) {
      case 1: return Uuid(i);
      case 2: return Uuid(i).substr(0, 12);  // "GPU-b000000i": unique
      case 3: return std::to_string(n + Int(0, 2));  // no such GPU
      case 4: return "GPU-b000000";  // ambiguous once there are two GPUs
      case 5: return OneOf<std::string>({"bogus", "-1", MigUuid(i)});
      default: return std::to_string(i);
    }
  }

  // Some GPUs in random order, rarely one of them twice.
  std::string GpuList(bool allow_bad) {
    const unsigned n = static_cast<unsigned>(free_.size());
    std::vector<unsigned> gpus(n);
    for (unsigned i = 0; i < n; ++i) gpus[i] = i;
    std::shuffle(gpus.begin(), gpus.end(), rng_);
    gpus.resize(Int(1, n));
    if (Chance(0.05)) gpus.insert(gpus.begin() + Int(0, static_cast<unsigned>(gpus.size())), gpus[Int(0, static_cast<unsigned>(gpus.size() - 1))]);
    std::string out;
    for (unsigned k = 0; k < gpus.size(); ++k) out += (k ? "," : "") + GpuEntry(gpus[k], allow_bad);
    return out;
  }

  std::string VisibleDevices() { return Chance(0.05) ? "" : GpuList(/*allow_bad=*/true); }

  std::vector<std::string> Options() {
    const unsigned n = static_cast<unsigned>(free_.size());
    std::vector<std::string> o;
    const unsigned count = Chance(0.06) ? Int(n + 1, 9) : std::min(n, 1 + Weighted({50, 25, 15, 10}));
    if (count != 1 || Chance(0.3)) o.insert(o.end(), {OneOf({"-g", "-n", "--gpu-count"}), std::to_string(count)});
    if (Chance(0.35)) o.insert(o.end(), {"--mem", Chance(0.02) ? "0" : SizeText(std::max<std::uint64_t>(1, AskedSize()))});
    if (Chance(0.3)) o.insert(o.end(), {"--min-free", SizeText(AskedSize())});
    if (Chance(0.3)) o.insert(o.end(), {"--max-util", std::to_string(OneOf<unsigned>({0, 5, 50, 99, 100, Int(0, 100)}))});
    if (Chance(0.2)) o.insert(o.end(), {"--gpus", GpuList(/*allow_bad=*/Chance(0.35))});
    if (Chance(0.3)) o.push_back("--share-foreign");
    if (Chance(0.5)) o.insert(o.end(), {"--order", OneOf({"memory", "util", "pci"})});
    return o;
  }

  const Pool& pool_;
  const json& base_;
  const std::uint64_t now_ns_;
  const std::uint64_t total_;
  std::mt19937_64 rng_;
  std::vector<std::uint64_t> free_;  ///< free memory of each GPU, in PCI order (also how many GPUs)
};

std::optional<std::uint64_t> EnvNumber(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::stoull(v, nullptr, 0);
}

std::uint64_t NowNs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// What one outcome shows, for the summary and the coverage check.
std::string Kind(const Outcome& o) {
  if (o.pick.exit_code == 0) return "granted";
  if (o.pick.exit_code == 5) return "exit 5 (too few free now)";
  if (o.pick.exit_code == 2 && Contains(o.pick.err, "can ever qualify")) return "exit 2 (can never qualify)";
  if (o.pick.exit_code == 2 && Contains(o.pick.err, "--gpus")) return "exit 2 (--gpus names no GPU)";
  return fmt::format("exit {} (other)", o.pick.exit_code);
}

// Reasons the random states should reach now and then: if the generator stops producing them, the
// property says less than it seems to.
const std::vector<std::string>& ReasonsToCover() {
  static const std::vector<std::string> reasons = {
      "leased by", "held for an earlier request", "shared by", "in use by", "which did not lease this GPU",
      "not visible here", "EXCLUSIVE_PROCESS compute mode", "compute mode PROHIBITED", "failed (", "MIG mode on",
      "memory not reported", "processes are not reported", "utilisation not reported", "% busy >", " free < ",
      "declared", "not among the GPUs this job may use", "margin >"};
  return reasons;
}

TEST(PickRunProperty, AgreeOnRandomStates) {
  const std::uint64_t seed = EnvNumber("GPULANE_PROPERTY_SEED").value_or(std::random_device{}() * 0x100000000ULL ^ std::random_device{}());
  const std::uint64_t states = EnvNumber("GPULANE_PROPERTY_STATES").value_or(1000);
  const std::optional<std::uint64_t> only = EnvNumber("GPULANE_PROPERTY_STATE");
  // To look at examples: the reports of the first states whose answer (kind or pick's stderr) says this.
  const char* show = std::getenv("GPULANE_PROPERTY_SHOW");
  unsigned shown = 0;
  std::cout << "seed " << seed << " (replay: GPULANE_PROPERTY_SEED=" << seed << ")\n";
  const auto start = std::chrono::steady_clock::now();

  Pool pool;
  Bench bench;
  const json base = RecordedIdleGpu();
  const std::uint64_t now_ns = NowNs();
  std::map<std::string, unsigned> kinds, reasons;
  unsigned failures = 0, checked = 0;
  for (std::uint64_t i = only.value_or(0); i < (only ? *only + 1 : states); ++i) {
    const Scenario s = Generator(seed, i, pool, base, now_ns).Make();
    const Outcome o = bench.Run(s);
    ++checked;
    ++kinds[Kind(o)];
    for (const std::string& r : ReasonsToCover()) reasons[r] += Contains(o.pick.err, r);
    auto agree = Agree(o);
    if (!agree) {
      ADD_FAILURE() << agree.message() << " on state " << i << " of seed " << seed << "\nreplay: GPULANE_PROPERTY_SEED="
                    << seed << " GPULANE_PROPERTY_STATE=" << i
                    << " build/integration_tests --gtest_filter=PickRunProperty.*\n"
                    << Report(s, o, &pool);
      if (++failures >= 3) break;
    } else if (only || (show && *show && shown < 5 && (Contains(Kind(o), show) || Contains(o.pick.err, show)))) {
      ++shown;
      std::cout << "state " << i << ":\n" << Report(s, o, &pool);
    }
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("{} states in {:.1f} s ({:.1f} ms each)\n", checked, wall_s, 1000 * wall_s / checked);
  for (const auto& [kind, n] : kinds) std::cout << fmt::format("  {:5}  {}\n", n, kind);
  std::cout << "reasons given (states):\n";
  for (const auto& [reason, n] : reasons) std::cout << fmt::format("  {:5}  {}\n", n, reason);
  if (failures) FAIL() << "seed " << seed << ": " << failures << " disagreement(s) (stopped after 3)";

  // The generator covers what it should: every kind of answer and every reason, often enough. (The
  // floors lie far below what the generator gives, for it to fail only when it is broken: per 1000
  // states about 300 grants, 450 refusals for now, 200 requests that can never be met, 30 --gpus
  // errors, and each reason 10 times or more.)
  if (checked >= 1000) {
    for (const char* kind : {"granted", "exit 5 (too few free now)", "exit 2 (can never qualify)", "exit 2 (--gpus names no GPU)"})
      EXPECT_GE(kinds[kind], checked / 200) << kind;
    EXPECT_GE(kinds["granted"], checked / 5);
    EXPECT_GE(kinds["exit 5 (too few free now)"], checked / 5);
    for (const std::string& r : ReasonsToCover()) EXPECT_GE(reasons[r], 1u) << "no state made pick say '" << r << "'";
  }
}

// ---- Fixed cases: the situations the random states showed worth writing down ---------------------

std::string GpuUuid(unsigned i) { return MakeUuid(0xb0000000u + i); }
std::uint64_t Total() { return RecordedIdleGpu()["memory"]["total"].get<std::uint64_t>(); }
std::string PropertyMe() { return UserName(geteuid()); }

// Idle GPUs cloned from the recorded H200 (UUIDs GpuUuid(i)), GPU i with free[i] bytes free.
json Machine(const std::vector<std::uint64_t>& free) {
  json state = RecordedH200x2(UnusedPid());
  const json base = RecordedIdleGpu();
  state["devices"] = json::array();
  for (unsigned i = 0; i < free.size(); ++i) {
    json d = CloneGpu(base, GpuUuid(i), fmt::format("00000000:{:02X}:00.0", 0x18 + 0x10 * i), i);
    SetFreeMemory(d, free[i]);
    SetUtilization(d, 0);
    state["devices"].push_back(std::move(d));
  }
  return state;
}

json LeaseOf(const std::string& job_id, std::uint32_t pid, std::uint32_t pgid, const std::vector<unsigned>& gpus,
             std::optional<std::uint64_t> mem = std::nullopt) {
  json leased = json::array();
  for (unsigned g : gpus) {
    json e = {{"uuid", GpuUuid(g)}};
    if (mem) e["mem_bytes"] = *mem;
    leased.push_back(e);
  }
  return {{"job_id", job_id}, {"pid", pid}, {"pgid", pgid}, {"command", "python train.py"}, {"gpus", leased}, {"started_s", 1.7e9}};
}

json TicketOf(unsigned count, int priority, std::uint64_t seq) {
  return {{"seq", seq},
          {"pid", getpid()},
          {"request", {{"count", count}, {"order", "memory"}, {"share_foreign", false}, {"priority", priority}, {"gpu_list", ""}}}};
}

constexpr std::uint64_t kSecondNs = 1000000000ULL;

// Both commands agree on `s`, and grant `gpus`.
::testing::AssertionResult BothGrant(const Scenario& s, const std::string& gpus) {
  Bench bench;
  const Outcome o = bench.Run(s);
  if (Agree(o) && o.pick.exit_code == 0 && o.pick.out == gpus + "\n") return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected both to grant " << gpus << "\n" << Report(s, o, nullptr);
}

// Both commands agree on `s`, and refuse it with exit `code` and an error line that contains `part`.
::testing::AssertionResult BothRefuse(const Scenario& s, int code, const std::string& part) {
  Bench bench;
  const Outcome o = bench.Run(s);
  if (Agree(o) && o.pick.exit_code == code && Contains(o.pick.err, part)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected both to fail with exit " << code << " saying '" << part << "'\n"
                                       << Report(s, o, nullptr);
}

// A request waiting in line for two GPUs, one of them leased, reserves the free one: a newcomer
// of its priority cannot take it, one of higher priority can; a later ticket of higher priority
// stands ahead all the same.
TEST(PickRunAgree, ATicketAheadReservesTheGpusItWaitsFor) {
  Scenario s;
  s.state = Machine({Total(), Total()});
  s.leases = {{LeaseOf("7", Pool::outside(0), 0, {0})}};
  s.tickets = {{TicketOf(2, 0, NowNs() - kSecondNs)}};
  EXPECT_TRUE(BothRefuse(s, 5, fmt::format("GPU0: leased by {} (job 7); GPU1: held for an earlier request, 1st in line", PropertyMe())));
  s.tickets = {{TicketOf(2, -1, NowNs() - kSecondNs)}};
  EXPECT_TRUE(BothGrant(s, "1")) << "a ticket of lower priority stands behind the newcomer";
  s.tickets = {{TicketOf(2, 1, NowNs() + 3600 * kSecondNs)}};
  EXPECT_TRUE(BothRefuse(s, 5, "GPU1: held for an earlier request, 1st in line")) << "higher priority first, whatever its seq";
  s.tickets = {{TicketOf(2, 0, NowNs() + 3600 * kSecondNs)}};
  EXPECT_TRUE(BothRefuse(s, 5, "GPU1: held for an earlier request, 1st in line"))
      << "a ticket from a clock ahead of this one: a new run's ticket is numbered after it";
}

// A request ahead in line that fits now is served first (its holder takes the GPUs within
// milliseconds): the newcomer gets what is left.
TEST(PickRunAgree, AnEarlierTicketThatFitsNowIsServedFirst) {
  Scenario s;
  s.state = Machine({Total(), Total() - 10 * kGiB, Total() - 20 * kGiB});
  s.tickets = {{TicketOf(1, 0, NowNs() - kSecondNs)}};
  EXPECT_TRUE(BothGrant(s, "1")) << "the ticket takes GPU0, the freest";
  s.options = {"-g", "3"};
  EXPECT_TRUE(BothRefuse(s, 5, fmt::format("GPU0: leased by {} (earlier in line)", PropertyMe())));
}

// A lease owns the processes of its supervisor's tree (its "pid" an ancestor) and of its job's
// process group ("pgid"); any other process on its GPU is foreign. A shared lease's own process
// counts against what it declared.
TEST(PickRunAgree, ALeaseOwnsItsSupervisorsDescendantsAndItsJobsProcessGroup) {
  JobTree job;
  Scenario s;
  s.state = Machine({Total() - 30 * kGiB, Total()});
  AddProcess(s.state["devices"][0], job.child(), 30 * kGiB);
  s.options = {"--gpus", "0", "--mem", "20GiB"};
  s.leases = {{LeaseOf("9", job.supervisor(), 0, {0}, 40 * kGiB)}};
  EXPECT_TRUE(BothGrant(s, "0")) << "the child of the lease's supervisor is the lease's";
  s.leases = {{LeaseOf("9", Pool::outside(0), job.child(), {0}, 40 * kGiB)}};
  EXPECT_TRUE(BothGrant(s, "0")) << "a process of the lease's process group is the lease's";
  s.leases = {{LeaseOf("9", Pool::outside(0), job.supervisor(), {0}, 40 * kGiB)}};
  EXPECT_TRUE(BothGrant(s, "0")) << "a process below the job's process group is the lease's (a child that left it)";
  s.state["devices"][0]["processes"][0]["pid"] = job.supervisor();
  s.leases = {{LeaseOf("9", Pool::outside(0), job.child(), {0}, 40 * kGiB)}};
  EXPECT_TRUE(BothRefuse(s, 5, fmt::format("GPU0: in use by {}'s sleep (pid {})", PropertyMe(), job.supervisor())))
      << "neither in the job's process group nor below it or the lease's pid: not the lease's";
  s.state["devices"][0]["processes"][0]["pid"] = job.child();
  // Owned: 30 of the 40 GiB declared are in use, 10 GiB more are promised: 140.4 - 30 - 10 - 1 (margin) GiB left.
  s.leases = {{LeaseOf("9", job.supervisor(), 0, {0}, 40 * kGiB)}};
  s.options = {"--gpus", "0", "--mem", "100GiB"};
  EXPECT_TRUE(BothRefuse(s, 5, "GPU0: 99.4 GiB free < 100 GiB declared"));
}

// A process of a gpulane job on a GPU its lease does not hold (a library that touches device 0
// whatever CUDA_VISIBLE_DEVICES says) keeps that GPU from others like any foreign process.
TEST(PickRunAgree, AJobsProcessOnAGpuItDidNotLeaseIsForeignThere) {
  JobTree job;
  Scenario s;
  s.state = Machine({Total(), Total()});
  AddProcess(s.state["devices"][1], job.child(), 1 * kGiB);
  s.leases = {{LeaseOf("9", job.supervisor(), 0, {0})}};
  EXPECT_TRUE(BothRefuse(
      s, 5, fmt::format("GPU1: in use by {}'s sleep (pid {}) of job 9, which did not lease this GPU", PropertyMe(), job.child())));
  s.options = {"--share-foreign"};
  EXPECT_TRUE(BothGrant(s, "1"));
}

// NVML may list a process for a moment after it ended: its memory is as good as free and it is no
// one's. A pid /proc does not show at all is another PID namespace's process: foreign.
TEST(PickRunAgree, AnEndedProcessNvmlStillListsLeavesItsMemoryFree) {
  Zombie ended;
  Scenario s;
  s.state = Machine({Total() - 100 * kGiB});
  AddProcess(s.state["devices"][0], ended.pid(), 100 * kGiB);
  s.options = {"--min-free", "120GiB"};
  EXPECT_TRUE(BothGrant(s, "0"));
  s.state["devices"][0]["processes"][0]["pid"] = Pool::outside(0);
  EXPECT_TRUE(BothRefuse(s, 5, fmt::format("GPU0: in use by pid {} (not visible here)", Pool::outside(0))));
}

// --gpus naming no GPU is the same usage error for both, before anything is decided.
TEST(PickRunAgree, AGpuListThatNamesNoGpuIsTheSameUsageError) {
  Scenario s;
  s.state = Machine({Total(), Total()});
  s.options = {"--gpus", "0,5"};
  EXPECT_TRUE(BothRefuse(s, 2, "--gpus 0,5: index 5 is out of range (there are 2 GPUs)"));
  s.options = {"--gpus", "GPU-b000000"};
  EXPECT_TRUE(BothRefuse(s, 2, "--gpus GPU-b000000: GPU-b000000 matches 2 GPUs' UUIDs"));
  s.options = {"--gpus", "1,1"};
  EXPECT_TRUE(BothRefuse(s, 2, "GPU 1 is listed twice"));
}

// The one difference on stderr: pick warns that an entry of the inherited CUDA_VISIBLE_DEVICES
// ends the list (it prints a value for the caller's shell); run takes the same GPUs silently.
TEST(PickRunAgree, OnlyPickWarnsAboutGarbageInCudaVisibleDevices) {
  Scenario s;
  s.state = Machine({Total(), Total()});
  s.visible_devices = "1,bogus,0";
  Bench bench;
  const Outcome o = bench.Run(s);
  EXPECT_TRUE(Agree(o)) << Report(s, o, nullptr);
  EXPECT_EQ(o.pick.out, "1\n");
  EXPECT_EQ(o.pick.err, "gpulane: warning: CUDA_VISIBLE_DEVICES='1,bogus,0': entry 'bogus' ends the list: 'bogus' is "
                        "neither an index nor a GPU-/MIG- UUID\n");
  EXPECT_EQ(o.run.err, "");
}

// Found by this test: LeaseDir::CreateTicket numbered a new ticket max(now, seq + 1) over the live
// tickets, and seq + 1 wrapped to 0 for a ticket at the largest seq, so run's ticket went ahead of
// it while pick's newcomer stood behind it. Tickets past lease::kMaxTicketSeq are unreadable: since
// issue 23 (item 2) an unreadable ticket whose holder lives stands in line for every GPU it names,
// all of them when it names none (unknown is not free), and both pick and run say so.
TEST(PickRunAgree, ATicketWithASeqGpulaneNeverWritesIsUnreadableAndHoldsEveryGpuForBoth) {
  Scenario s;
  s.state = Machine({Total(), Total() - 10 * kGiB});
  s.tickets = {{TicketOf(1, 0, std::numeric_limits<std::uint64_t>::max())}};
  EXPECT_TRUE(BothRefuse(s, 5, "GPU0: leased by")) << "a seq past the year 2116 is an unreadable ticket, held against every GPU";
}

// Found by this test: pick read the lease directory only when it opened safely and answered
// "nothing leased" otherwise, printing GPUs where run refuses the directory (exit 7) or cannot
// create it (exit 1). pick now opens it as run does.
TEST(PickRunAgree, AnUnsafeOrUncreatableLeaseDirectoryIsRefusedByBoth) {
  Scenario s;
  s.state = Machine({Total(), Total()});
  s.env["GPULANE_LEASE_DIR"] = "/proc/no-such-dir/leases";
  EXPECT_TRUE(BothRefuse(s, 1, "cannot create /proc/no-such-dir"));
  Bench bench;
  fs::permissions(bench.leases(), fs::perms::all);  // 0777: no sticky bit
  s.env.clear();
  const Outcome o = bench.Run(s);
  EXPECT_TRUE(Agree(o) && o.run.exit_code == 7) << Report(s, o, nullptr);
}

}  // namespace
}  // namespace gpulane::test
