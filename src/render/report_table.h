#pragma once
// `gpulane report`'s table and CSV (telemetry/report.h sums the rows). Unknown figures print as
// "-" (table) or an empty field (CSV), never 0.
#include <string>
#include <vector>

#include "telemetry/report.h"

namespace gpulane {

/// The table for people: one line per row under a header naming `by`'s key column, and a total
/// line when there is more than one row. Other people's text (user names, job ids) is escaped.
std::string ReportTableText(const std::vector<telemetry::ReportRow>& rows, telemetry::ReportBy by);

/// RFC 4180 CSV with a header line: key,jobs,gpu_hours,run_hours,energy_kwh,peak_memory_bytes,
/// mean_util_pct,idle_fraction,mean_wait_s.
std::string ReportCsv(const std::vector<telemetry::ReportRow>& rows, telemetry::ReportBy by);

}  // namespace gpulane
