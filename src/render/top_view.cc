#include "render/top_view.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "render/gauges.h"
#include "util/display_width.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane {
namespace {

// ANSI SGR codes, used only when colour is on.
constexpr const char* kBold = "1";
constexpr const char* kDim = "2";
constexpr const char* kTitle = "1;7";
constexpr const char* kCyan = "36";
constexpr const char* kBlue = "34";
constexpr const char* kGreen = "32";
constexpr const char* kYellow = "33";
constexpr const char* kRed = "31";
constexpr const char* kMagenta = "35";

// A piece of a line: text already safe for the terminal and its colour (nullptr: none).
struct Span {
  std::string text;
  const char* sgr = nullptr;
};
using Line = std::vector<Span>;

// Text someone else chose, made safe for the terminal: the one way such text enters a line.
std::string Theirs(std::string_view text) { return EscapeForTerminal(text); }

// The line cut to `width` columns, each span painted when colour is on.
std::string Emit(const Line& line, std::size_t width, bool color) {
  std::string out;
  std::size_t left = width;
  for (const Span& s : line) {
    if (left == 0) break;
    std::string_view text = PrefixOfColumns(s.text, left);
    left -= DisplayColumns(text);
    if (color && s.sgr && !text.empty()) out += fmt::format("\x1b[{}m{}\x1b[0m", s.sgr, text);
    else out += text;
  }
  return out;
}

const char* LevelColor(std::optional<double> fraction) {
  if (!fraction) return kDim;
  return *fraction < 0.5 ? kGreen : *fraction < 0.8 ? kYellow : kRed;
}

std::string Gib(std::optional<std::uint64_t> bytes) {
  return bytes ? fmt::format("{:.1f}", static_cast<double>(*bytes) / (1ULL << 30)) : "-";
}

std::string Percent(std::optional<double> pct) { return pct ? fmt::format("{:>3.0f}%", *pct) : "   -"; }

std::optional<double> Fraction(std::optional<std::uint64_t> part, std::optional<std::uint64_t> whole) {
  if (!part || !whole || *whole == 0) return std::nullopt;
  return static_cast<double>(*part) / static_cast<double>(*whole);
}

std::optional<double> UtilOf(const TopGpu& g) {
  return g.util_pct ? std::optional<double>(*g.util_pct) : std::nullopt;
}

// "5m", "90s", "1h": the span the sparklines cover, for their label.
std::string SpanLabel(double span_s) {
  if (span_s >= 3600 && static_cast<long>(span_s) % 3600 == 0) return fmt::format("{}h", static_cast<long>(span_s) / 3600);
  if (span_s >= 60 && static_cast<long>(span_s) % 60 == 0) return fmt::format("{}m", static_cast<long>(span_s) / 60);
  return fmt::format("{:.0f}s", span_s);
}

// ---- Header ------------------------------------------------------------------------------------

Line HeaderLine(const TopModel& m, const TopUi& ui) {
  char when[16] = "";
  const auto now = static_cast<std::time_t>(m.now_s);
  std::tm tm{};
  if (localtime_r(&now, &tm)) std::strftime(when, sizeof when, "%H:%M:%S", &tm);
  Line line{{"gpulane top", kBold}, {"  "}, {Theirs(m.hostname), kBold}, {fmt::format("  {}", when)}};
  if (m.driver_version) line.push_back({"  driver " + Theirs(*m.driver_version)});
  line.push_back({fmt::format("  {} GPU{}", m.gpus.size(), m.gpus.size() == 1 ? "" : "s")});
  line.push_back({fmt::format("  every {:g} s", m.refresh_s), kDim});
  if (!ui.user_filter.empty()) line.push_back({"  user " + Theirs(ui.user_filter), kYellow});
  return line;
}

// ---- GPUs --------------------------------------------------------------------------------------

// Column widths shared by the GPU lines and their sparkline lines.
struct GpuLayout {
  std::size_t name = 4;  ///< the name column
  std::size_t bar = 4;   ///< inside of each bar (and sparkline)
  bool sensors = true;   ///< temperature and power (left out on narrow terminals)
};

GpuLayout LayoutGpus(const TopModel& m, std::size_t width) {
  GpuLayout l;
  for (const TopGpu& g : m.gpus) l.name = std::max(l.name, DisplayColumns(Theirs(g.name.value_or("?"))));
  l.name = std::min<std::size_t>(l.name, 16);
  // Everything but the two bars: index and name (name + 5), utilisation label and figure (12),
  // memory's (24), temperature (7) and power (11), and 16 columns for "  job 12 (alice)".
  std::size_t fixed = l.name + 75;
  if (width < fixed + 2 * 8) {  // bars of 8 or more before temperature and power
    l.sensors = false;
    fixed -= 18;
  }
  l.bar = width > fixed + 8 ? std::clamp<std::size_t>((width - fixed) / 2, 4, 30) : 4;
  return l;
}

std::string Temperature(const TopGpu& g, bool unicode) {
  return g.temperature_c ? fmt::format("{:>3}{}", *g.temperature_c, unicode ? "°C" : "C") : std::string(unicode ? "  -°C" : "  -C");
}

std::string Power(const TopGpu& g) {
  auto w = [](std::optional<unsigned> mw) { return mw ? std::to_string(*mw / 1000) : std::string("-"); };
  return fmt::format("{:>3}/{:>3} W", w(g.power_mw), w(g.power_limit_mw));
}

Line GpuLine(const TopGpu& g, const GpuLayout& l, const TopStyle& s) {
  Line line{{FitColumns(std::to_string(g.index), 2, true), kCyan}, {" "},
            {FitColumns(Theirs(g.name.value_or("?")), l.name), kBlue}, {"  "}};
  if (g.error) {
    line.push_back({"failed: " + Theirs(*g.error), kRed});
    return line;
  }
  const std::optional<double> util = UtilOf(g);
  const std::optional<double> util_fraction = util ? std::optional<double>(*util / 100) : std::nullopt;
  const std::optional<double> memory = Fraction(g.memory_used_bytes, g.memory_total_bytes);
  line.push_back({"UTIL "});
  line.push_back({"["});
  line.push_back({BarCells(util_fraction, l.bar, s.unicode), LevelColor(util_fraction)});
  line.push_back({"] "});
  line.push_back({Percent(util), kGreen});
  line.push_back({"  MEM ["});
  line.push_back({BarCells(memory, l.bar, s.unicode), LevelColor(memory)});
  line.push_back({"] "});
  line.push_back({FitColumns(fmt::format("{}/{} GiB", Gib(g.memory_used_bytes), Gib(g.memory_total_bytes)), 15, true), kYellow});
  if (l.sensors) {
    line.push_back({"  " + Temperature(g, s.unicode), g.temperature_c.value_or(0) >= 80 ? kRed : kYellow});
    line.push_back({"  " + Power(g), kMagenta});
  }
  if (!g.processes_known) line.push_back({"  processes unknown", kDim});
  if (!g.holders.empty()) line.push_back({"  " + Theirs(g.holders), kCyan});
  return line;
}

std::vector<SparkPoint> SeriesOf(const TopGpu& g, bool memory) {
  std::vector<SparkPoint> points;
  points.reserve(g.history.size());
  for (const TopPoint& p : g.history) points.push_back({p.time_s, memory ? p.memory_used_bytes : p.util_pct});
  return points;
}

// The memory sparkline's scale: the GPU's memory, else the most its history shows.
double MemoryScale(const TopGpu& g) {
  if (g.memory_total_bytes && *g.memory_total_bytes > 0) return static_cast<double>(*g.memory_total_bytes);
  double most = 1;
  for (const TopPoint& p : g.history) most = std::max(most, p.memory_used_bytes.value_or(0));
  return most;
}

// The line under a GPU's: the sparklines of its utilisation and memory, under their bars.
Line SparkLine(const TopGpu& g, const TopModel& m, const GpuLayout& l, const TopStyle& s) {
  SparkWindow w{m.now_s - m.span_s, m.now_s, l.bar, 100, m.sample_interval_s * 1.5};
  Line line{{std::string(2 + 1 + l.name + 2, ' ')}, {FitColumns(SpanLabel(m.span_s), 4, true) + " ", kDim}, {"["}};
  line.push_back({Sparkline(SeriesOf(g, false), w, s.unicode), kGreen});
  line.push_back({"]" + std::string(1 + 4 + 2, ' ') + "    ["});
  w.max_value = MemoryScale(g);
  line.push_back({Sparkline(SeriesOf(g, true), w, s.unicode), kYellow});
  line.push_back({"]"});
  return line;
}

// ---- Processes and queue ------------------------------------------------------------------------

// Orders known values before unknown ones (-2, 2: whatever the direction), known ones by `less`
// (-1, 1: reversed when asked).
template <typename T, typename Less>
int CompareKnown(const std::optional<T>& a, const std::optional<T>& b, Less less) {
  if (a.has_value() != b.has_value()) return a.has_value() ? -2 : 2;
  if (!a) return 0;
  return less(*a, *b) ? -1 : less(*b, *a) ? 1 : 0;
}

int CompareBy(TopSort sort, const TopProcess& a, const TopProcess& b) {
  switch (sort) {
    case TopSort::kGpu: return 0;
    case TopSort::kMemory: return CompareKnown(a.memory_bytes, b.memory_bytes, std::greater<>());
    case TopSort::kUtil: return CompareKnown(a.util_pct, b.util_pct, std::greater<>());
    case TopSort::kUser: return CompareKnown(a.user, b.user, std::less<>());
    case TopSort::kPid: return a.pid < b.pid ? -1 : a.pid > b.pid ? 1 : 0;
  }
  return 0;
}

Line ProcessRow(const TopProcess& p) {
  const std::string mem = p.memory_bytes ? FormatBytes(*p.memory_bytes) : "-";
  Line line{{fmt::format("{:>3} {:>7} ", p.gpu, p.pid)},
            {FitColumns(p.user ? Theirs(*p.user) : "?", 10) + " ", kBold},
            {FitColumns(p.job_id.empty() ? "-" : Theirs(p.job_id), 8) + " ", kCyan},
            {FitColumns(mem, 10, true) + " ", kYellow},
            {Percent(p.util_pct) + "  ", kGreen}};
  if (p.command) line.push_back({Theirs(*p.command)});
  else line.push_back({"(not visible here)", kDim});
  return line;
}

Line JobRow(const TopJob& j) {
  const char* state_color = j.state == "running" ? kGreen : j.state == "held" ? kRed : kYellow;
  return {{FitColumns(Theirs(j.id), 8, true) + " ", kCyan},
          {FitColumns(Theirs(j.user), 10) + " ", kBold},
          {FitColumns(Theirs(j.name), 16) + " "},
          {FitColumns(Theirs(j.gpus), 10) + " "},
          {FitColumns(Theirs(j.state), 9) + " ", state_color},
          {FitColumns(j.age_s ? FormatSeconds(*j.age_s) : "-", 8, true) + "  "},
          {Theirs(j.where)}};
}

// A section: its title, its column header and its rows, cut to `budget` lines.
struct Section {
  Line title;
  Line header;
  std::vector<Line> rows;  ///< empty: `empty` shown instead
  std::string empty;
};

std::size_t Need(const Section& s) { return 2 + std::max<std::size_t>(1, s.rows.size()); }

void Place(const Section& s, std::size_t budget, std::vector<Line>& out) {
  if (budget == 0) return;
  out.push_back(s.title);
  if (budget == 1) return;
  out.push_back(s.header);
  const std::size_t room = budget - 2;
  if (s.rows.empty()) {
    if (room > 0) out.push_back({{s.empty, kDim}});
    return;
  }
  const bool cut = s.rows.size() > room;
  const std::size_t shown = cut ? (room > 0 ? room - 1 : 0) : s.rows.size();
  for (std::size_t i = 0; i < shown; ++i) out.push_back(s.rows[i]);
  if (cut && room > 0) out.push_back({{fmt::format("... {} more", s.rows.size() - shown), kDim}});
}

Section ProcessSection(const TopModel& m, const TopUi& ui, const TopStyle& s) {
  const std::vector<TopProcess> shown = SortedProcesses(m.processes, ui);
  const char* arrow = s.unicode ? (ui.reverse ? "▲" : "▼") : (ui.reverse ? "^" : "v");
  Section section{{{fmt::format("PROCESSES  {} of {}  sorted by {} {}", shown.size(), m.processes.size(), TopSortName(ui.sort), arrow), kTitle}},
                  {{"GPU     PID USER       JOB         GPU-MEM UTIL  COMMAND", kBold}},
                  {},
                  ui.user_filter.empty() ? "(no processes)" : "(no processes of " + Theirs(ui.user_filter) + ")"};
  for (const TopProcess& p : shown) section.rows.push_back(ProcessRow(p));
  return section;
}

Section QueueSection(const TopModel& m, const TopUi& ui) {
  std::size_t running = 0, total = 0;
  std::vector<Line> rows;
  for (const TopJob& j : m.jobs) {
    if (!ui.user_filter.empty() && j.user != ui.user_filter) continue;
    ++total;
    running += j.state == "running";
    rows.push_back(JobRow(j));
  }
  return {{{fmt::format("QUEUE  {} job{}: {} running, {} waiting", total, total == 1 ? "" : "s", running, total - running), kTitle}},
          {{"      ID USER       NAME             GPUS       STATE          AGE  WHERE / WHY", kBold}},
          std::move(rows),
          "(no queued or running jobs)"};
}

// ---- Footer ------------------------------------------------------------------------------------

Line FooterLine(const TopUi& ui) {
  if (ui.editing)
    return {{"filter by user (Enter: apply, empty for everyone; Esc: cancel): ", kBold}, {Theirs(ui.edit_text)}, {"_"}};
  return {{"q", kBold}, {" quit  sort: "}, {"g", kBold}, {" gpu "}, {"m", kBold}, {" memory "}, {"u", kBold},
          {" util "},   {"n", kBold},      {" user "},  {"p", kBold}, {" pid  "},  {"r", kBold}, {" reverse  "},
          {"f", kBold}, {" filter by user"}};
}

// The GPU lines, with sparklines when there is history and room for them; cut to `budget` lines.
std::vector<Line> GpuLines(const TopModel& m, const TopStyle& s, std::size_t width, std::size_t budget) {
  const GpuLayout layout = LayoutGpus(m, width);
  const bool sparks = m.has_history && 2 * m.gpus.size() <= budget;
  std::vector<Line> out;
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    const std::size_t left = budget - out.size();
    if (left == 0) break;
    if (left == 1 && i + 1 < m.gpus.size()) {
      out.push_back({{fmt::format("... {} more GPUs", m.gpus.size() - i), kDim}});
      break;
    }
    out.push_back(GpuLine(m.gpus[i], layout, s));
    if (sparks && !m.gpus[i].error) out.push_back(SparkLine(m.gpus[i], m, layout, s));
  }
  if (m.gpus.empty() && budget > 0) out.push_back({{"no NVIDIA GPU found", kDim}});
  return out;
}

}  // namespace

const char* TopSortName(TopSort sort) {
  switch (sort) {
    case TopSort::kGpu: return "gpu";
    case TopSort::kMemory: return "memory";
    case TopSort::kUtil: return "util";
    case TopSort::kUser: return "user";
    case TopSort::kPid: return "pid";
  }
  return "gpu";
}

std::vector<TopProcess> SortedProcesses(const std::vector<TopProcess>& processes, const TopUi& ui) {
  std::vector<TopProcess> out;
  for (const TopProcess& p : processes)
    if (ui.user_filter.empty() || (p.user && *p.user == ui.user_filter)) out.push_back(p);
  std::stable_sort(out.begin(), out.end(), [&](const TopProcess& a, const TopProcess& b) {
    int c = CompareBy(ui.sort, a, b);
    if (ui.reverse && (c == 1 || c == -1)) c = -c;
    if (c != 0) return c < 0;
    return a.gpu != b.gpu ? (a.gpu < b.gpu) != (ui.reverse && ui.sort == TopSort::kGpu) : a.pid < b.pid;
  });
  return out;
}

std::vector<std::string> RenderTop(const TopModel& m, const TopUi& ui, const TopStyle& s, std::size_t width,
                                   std::size_t height) {
  if (width == 0 || height == 0) return {};
  std::vector<Line> top{HeaderLine(m, ui)};
  for (const std::string& note : m.notes) top.push_back({{Theirs(note), kYellow}});  // they quote the daemon
  const std::size_t footer = 1;
  const std::size_t above = std::min(top.size(), height - footer);
  top.resize(above);
  for (Line& l : GpuLines(m, s, width, height - footer - top.size())) top.push_back(std::move(l));
  std::size_t room = height - footer - top.size();
  const Section processes = ProcessSection(m, ui, s);
  if (m.queue_known) {
    const Section queue = QueueSection(m, ui);
    // Both when they fit; else the queue keeps a third (at least 3 lines) once there are 8 to share.
    const std::size_t queue_budget = Need(processes) + Need(queue) <= room ? Need(queue)
                                     : room >= 8 ? std::min(Need(queue), std::max<std::size_t>(3, room / 3))
                                                 : 0;
    const std::size_t process_budget = room > queue_budget ? room - queue_budget : 0;
    Place(processes, std::min(process_budget, Need(processes)), top);
    Place(queue, std::min(queue_budget, height - footer - top.size()), top);
  } else {
    Place(processes, std::min(room, Need(processes)), top);
  }
  std::vector<std::string> lines;
  lines.reserve(height);
  for (const Line& l : top) lines.push_back(Emit(l, width, s.color));
  lines.resize(height - footer);
  lines.push_back(Emit(FooterLine(ui), width, s.color));
  return lines;
}

}  // namespace gpulane
