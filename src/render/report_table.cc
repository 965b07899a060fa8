#include "render/report_table.h"

#include <fmt/format.h>

#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane {
namespace {

const char* KeyHeader(telemetry::ReportBy by) {
  switch (by) {
    case telemetry::ReportBy::kJob: return "JOB";
    case telemetry::ReportBy::kUser: return "USER";
    case telemetry::ReportBy::kGpu: return "GPU";
    case telemetry::ReportBy::kDay: return "DAY";
  }
  return "KEY";
}

std::string Energy(const std::optional<double>& joules) {
  if (!joules) return "-";
  return fmt::format("{:.2f}", *joules / 3.6e6);
}

std::string Percent(const std::optional<double>& pct) { return pct ? fmt::format("{:.0f} %", *pct) : "-"; }

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

template <typename T>
std::string Opt(const std::optional<T>& v, const char* format) {
  return v ? fmt::format(fmt::runtime(format), *v) : "";
}

}  // namespace

std::string ReportTableText(const std::vector<telemetry::ReportRow>& rows, telemetry::ReportBy by) {
  const std::size_t key_width = by == telemetry::ReportBy::kGpu ? 44 : 16;
  const std::string row_format = fmt::format("{{:<{}}} {{:>6}} {{:>9}} {{:>8}} {{:>10}} {{:>6}} {{:>6}} {{:>10}}\n", key_width);
  std::string out = fmt::format(fmt::runtime(row_format), KeyHeader(by), "JOBS", "GPU-H", "KWH", "PEAK MEM", "UTIL",
                                "IDLE", "MEAN WAIT");
  telemetry::ReportRow total;
  total.key = "total";
  for (const auto& r : rows) {
    out += fmt::format(fmt::runtime(row_format), EscapeForTerminal(r.key), r.jobs, fmt::format("{:.2f}", r.gpu_s / 3600),
                       Energy(r.energy_j), r.peak_memory_bytes ? FormatBytes(*r.peak_memory_bytes) : "-",
                       Percent(r.mean_util_pct), r.idle_fraction ? Percent(*r.idle_fraction * 100) : "-",
                       r.mean_wait_s ? FormatSeconds(*r.mean_wait_s) : "-");
    total.jobs += r.jobs;
    total.gpu_s += r.gpu_s;
    if (r.energy_j) total.energy_j = total.energy_j.value_or(0) + *r.energy_j;
  }
  if (rows.size() > 1 && by != telemetry::ReportBy::kGpu)
    out += fmt::format(fmt::runtime(row_format), total.key, total.jobs, fmt::format("{:.2f}", total.gpu_s / 3600),
                       Energy(total.energy_j), "", "", "", "");
  if (rows.empty()) out += "(no finished job in this period)\n";
  return out;
}

std::string ReportCsv(const std::vector<telemetry::ReportRow>& rows, telemetry::ReportBy by) {
  std::string out = fmt::format("{},jobs,gpu_hours,run_hours,energy_kwh,peak_memory_bytes,mean_util_pct,idle_fraction,mean_wait_s\r\n",
                                telemetry::ReportByName(by));
  for (const auto& r : rows)
    out += fmt::format("{},{},{:.4f},{:.4f},{},{},{},{},{}\r\n", CsvField(r.key), r.jobs, r.gpu_s / 3600, r.run_s / 3600,
                       r.energy_j ? fmt::format("{:.4f}", *r.energy_j / 3.6e6) : "", Opt(r.peak_memory_bytes, "{}"),
                       Opt(r.mean_util_pct, "{:.1f}"), Opt(r.idle_fraction, "{:.3f}"), Opt(r.mean_wait_s, "{:.1f}"));
  return out;
}

}  // namespace gpulane
