#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "render/status_view.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane {
namespace {

// Every text field of the view comes from someone else (NVML, /proc: a process's name and command
// line are its owner's to choose, lease files: their writers', the host name) and passes through
// this before it is laid out; only the palette's own codes reach the terminal as escapes.
std::string Safe(std::string_view text) { return EscapeForTerminal(text); }

// ANSI SGR codes, used only when colour is on.
struct Palette {
  bool on;
  std::string Paint(std::string_view text, const char* code) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : std::string(text);
  }
};

constexpr const char* kCyan = "36";
constexpr const char* kBlue = "34";
constexpr const char* kRed = "1;31";
constexpr const char* kYellow = "33";
constexpr const char* kGreen = "32";
constexpr const char* kBold = "1";
constexpr const char* kDim = "2";
constexpr const char* kMagenta = "35";

template <typename T>
std::string Or(const std::optional<T>& value, const char* fmt_spec, std::string_view missing) {
  if (!value) return std::string(missing);
  return fmt::format(fmt::runtime(fmt_spec), *value);
}

std::string Header(const GpuSnapshot& s, const StatusContext& c, const Palette& p) {
  char when[64];
  std::tm tm{};
  localtime_r(&c.now, &tm);
  std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", &tm);
  std::string line = fmt::format("{}  {}", p.Paint(Safe(c.hostname), kBold), when);
  if (s.driver_version) line += fmt::format("  driver {}", Safe(*s.driver_version));
  if (s.cuda_driver_version) line += fmt::format("  CUDA {}", FormatCudaVersion(*s.cuda_driver_version));
  return line + "\n";
}

// nvidia-smi's Type column: "C", "G" or "C+G".
const char* KindMark(ProcessKind kind) {
  switch (kind) {
    case ProcessKind::kCompute: return "C";
    case ProcessKind::kGraphics: return "G";
    case ProcessKind::kComputeAndGraphics: return "C+G";
  }
  return "?";
}

// A compute mode other than DEFAULT, as nvmlComputeMode_t names it; "" for DEFAULT or unreported.
std::string ComputeModeMark(const GpuDevice& d, const Palette& p) {
  if (!d.compute_mode) return "";
  switch (*d.compute_mode) {
    case ComputeMode::kDefault: return "";
    case ComputeMode::kExclusiveThread: return p.Paint("EXCLUSIVE_THREAD", kYellow) + " ";
    case ComputeMode::kExclusiveProcess: return p.Paint("EXCLUSIVE_PROCESS", kYellow) + " ";
    case ComputeMode::kProhibited: return p.Paint("PROHIBITED", kRed) + " ";
  }
  return "";
}

// " !job 7 did not lease GPU0" for a gpulane job's process on a GPU that job did not lease.
std::string StrayMarkText(const GpuDevice& d, const GpuProcess& proc, const StatusContext& c, const Palette& p) {
  auto stray = c.strays.find({d.pci_index, proc.pid});
  if (stray == c.strays.end()) return "";
  return " " + p.Paint(fmt::format("!job {} did not lease GPU{}", Safe(stray->second.job_text), d.pci_index), kRed);
}

// "alice:python/123(512M)"; a graphics process carries its type first: "root:Xorg/99(G 45M)", "(C+G)".
// A pid /proc does not show (another PID namespace, as in a container, or a recording's process)
// has no user or command to show: "pid 4242 (not visible here, 512M)", as pick and run word it.
std::string ProcessShort(const GpuProcess& proc, const Palette& p) {
  std::vector<std::string> notes;
  if (proc.kind != ProcessKind::kCompute) notes.push_back(KindMark(proc.kind));
  if (proc.used_memory_bytes) notes.push_back(fmt::format("{}M", BytesToMib(*proc.used_memory_bytes)));
  if (!proc.user && !proc.command)
    return fmt::format("pid {} ({}{}{})", proc.pid, p.Paint("not visible here", kDim), notes.empty() ? "" : ", ",
                       fmt::join(notes, " "));
  std::string who = proc.user ? p.Paint(Safe(*proc.user), kBold) : std::string("?");
  std::string what = proc.command ? fmt::format("{}/{}", Safe(*proc.command), proc.pid) : std::to_string(proc.pid);
  std::string paren = notes.empty() ? "" : fmt::format("({})", fmt::join(notes, " "));
  return fmt::format("{}:{}{}", who, what, paren);
}

std::string GpuLine(const GpuDevice& d, const GpuSnapshot& s, const StatusContext& c, const Palette& p) {
  std::string index = p.Paint(fmt::format("[{}]", d.pci_index), kCyan);
  std::string nvml = s.nvml_order_differs() ? p.Paint(fmt::format(" nvml:{}", d.nvml_index), kDim) : "";
  std::string name = p.Paint(fmt::format("{:<12}", Safe(d.name.value_or("?"))), kBlue);
  if (d.failed())
    return fmt::format("{}{} {} | {} {}\n", index, nvml, name, p.Paint(fmt::format("failed: {}", Safe(*d.error)), kRed),
                       Safe(d.uuid));
  const char* temp_color = d.temperature_c.value_or(0) >= 80 ? kRed : kYellow;
  std::string temp = p.Paint(Or(d.temperature_c, "{:>3}°C", "  -°C"), temp_color);
  std::string util = p.Paint(Or(d.utilization_gpu_pct, "{:>3} %", "  - %"), kGreen);
  std::string used = p.Paint(Or(d.memory_used_bytes ? std::optional(BytesToMib(*d.memory_used_bytes)) : std::nullopt,
                                "{:>6}", "     -"),
                             kYellow);
  std::string total = p.Paint(
      Or(d.memory_total_bytes ? std::optional(BytesToMib(*d.memory_total_bytes)) : std::nullopt, "{:>6}", "     -"),
      kYellow);
  std::string power = fmt::format(
      "{} / {} W", p.Paint(Or(d.power_draw_mw ? std::optional(*d.power_draw_mw / 1000) : std::nullopt, "{:>3}", "  -"), kMagenta),
      Or(d.power_limit_mw ? std::optional(*d.power_limit_mw / 1000) : std::nullopt, "{:>3}", "  -"));
  std::string procs;
  procs += ComputeModeMark(d, p);
  if (d.mig_enabled.value_or(false)) procs += p.Paint(fmt::format("MIG({}) ", d.mig_devices.size()), kDim);
  if (!d.processes) procs += "?";
  else
    for (const auto& proc : *d.processes) procs += ProcessShort(proc, p) + StrayMarkText(d, proc, c, p) + " ";
  auto holder = c.holders.find(d.uuid);
  if (holder != c.holders.end()) procs += p.Paint(fmt::format("[{}] ", Safe(holder->second)), kCyan);
  if (auto held = c.reserved.find(d.uuid); held != c.reserved.end())
    procs += p.Paint(fmt::format("(reserved for {}) ", Safe(held->second)), kYellow);
  if (!c.visible.Allows(d.pci_index)) procs += p.Paint("(not in CUDA_VISIBLE_DEVICES)", kDim);
  while (!procs.empty() && procs.back() == ' ') procs.pop_back();
  return fmt::format("{}{} {} | {} {} | {} / {} MiB | {} |{}{}\n", index, nvml, name, temp, util, used, total, power,
                     procs.empty() ? "" : " ", procs);  // no trailing space on a GPU without processes
}

// One line per MIG device of a GPU in MIG mode, under the GPU's: its profile (what --mig asks for),
// UUID (what CUDA_VISIBLE_DEVICES names), memory, its processes and the lease holding it.
std::string MigLines(const GpuDevice& d, const StatusContext& c, const Palette& p) {
  std::string out;
  if (!d.mig_enabled.value_or(false)) return out;
  for (const MigDevice& m : d.mig_devices) {
    std::string procs;
    if (d.processes)
      for (const auto& proc : *d.processes)
        if (proc.mig_uuid == m.uuid) procs += ProcessShort(proc, p) + " ";
    if (auto holder = c.holders.find(m.uuid); holder != c.holders.end())
      procs += p.Paint(fmt::format("[{}] ", Safe(holder->second)), kCyan);
    while (!procs.empty() && procs.back() == ' ') procs.pop_back();
    auto mib = [](const std::optional<std::uint64_t>& b) {
      return b ? fmt::format("{:>6}", BytesToMib(*b)) : std::string("     -");
    };
    out += fmt::format("    MIG {:<9} {} | {} / {} MiB |{}{}\n", Safe(m.profile.value_or("?")), Safe(m.uuid),
                       p.Paint(mib(m.memory_used_bytes), kYellow), p.Paint(mib(m.memory_total_bytes), kYellow),
                       procs.empty() ? "" : " ", procs);
  }
  return out;
}

// Under a GPU the daemon's sampler marks (daemon snapshots): "  ! drained: ..." and one
// "  ! <anomaly>" line each.
std::string AnomalyLines(const GpuDevice& d, const Palette& p) {
  std::string out;
  if (d.drained) out += p.Paint(fmt::format("  ! drained (takes no new jobs): {}", Safe(*d.drained)), kRed) + "\n";
  for (const auto& line : d.anomalies)
    if (!d.drained || line != *d.drained) out += p.Paint(fmt::format("  ! {}", Safe(line)), kYellow) + "\n";
  return out;
}

// One line per process: pid, user, memory, type (C, G, C+G), command line.
std::string ProcessLines(const GpuDevice& d, const StatusContext& c, const Palette& p) {
  std::string out;
  if (!d.processes) return out;
  for (const auto& proc : *d.processes) {
    std::string mem = proc.used_memory_bytes ? fmt::format("{} MiB", BytesToMib(*proc.used_memory_bytes)) : "- MiB";
    out += fmt::format("    {:>7}  {:<10} {:>10}  {:<3}  {}{}{}\n", proc.pid, Safe(proc.user.value_or("?")), mem,
                       KindMark(proc.kind),
                       proc.cmdline ? Safe(*proc.cmdline) : p.Paint("(not visible in this PID namespace)", kDim),
                       proc.mig_uuid ? "  on " + Safe(*proc.mig_uuid) : "", StrayMarkText(d, proc, c, p));
  }
  return out;
}

}  // namespace

std::string FormatCudaVersion(int version) { return fmt::format("{}.{}", version / 1000, (version % 1000) / 10); }

std::string RenderStatusText(const GpuSnapshot& snapshot, const StatusContext& context, const TextOptions& options) {
  Palette p{options.color};
  std::string out = Header(snapshot, context, p);
  for (const auto& d : snapshot.devices) {
    out += GpuLine(d, snapshot, context, p);
    out += MigLines(d, context, p);
    out += AnomalyLines(d, p);
    if (options.full_processes) out += ProcessLines(d, context, p);
  }
  if (snapshot.devices.empty()) out += "no NVIDIA GPU found\n";
  return out;
}

}  // namespace gpulane
