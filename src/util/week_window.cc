#include "util/week_window.h"

#include <cctype>
#include <fmt/format.h>

namespace gpulane {
namespace {

constexpr const char* kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};

bool ParseDay(const std::string& s, unsigned* day) {
  if (s.size() != 3) return false;
  for (unsigned d = 0; d < 7; ++d) {
    bool same = true;
    for (int i = 0; i < 3; ++i)
      if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(kDays[d][i]))) same = false;
    if (same) return *day = d, true;
  }
  return false;
}

// "HH:MM", 00:00..24:00, into minutes.
bool ParseClock(const std::string& s, unsigned* minutes) {
  if (s.size() != 5 || s[2] != ':') return false;
  for (int i : {0, 1, 3, 4})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  const unsigned h = (s[0] - '0') * 10 + (s[1] - '0'), m = (s[3] - '0') * 10 + (s[4] - '0');
  if (m > 59 || h > 24 || (h == 24 && m != 0)) return false;
  return *minutes = h * 60 + m, true;
}

}  // namespace

const char* DayName(unsigned day) { return kDays[day % 7]; }

Result<WeekWindow> ParseWeekWindow(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("'{}': {}", text, why));
  };
  const std::string format = "write it like \"Mon-Fri 08:00-20:00\" or \"20:00-08:00\"";
  WeekWindow w;
  w.text = text;
  std::string days, hours = text;
  if (auto space = text.find(' '); space != std::string::npos) {
    days = text.substr(0, space);
    hours = text.substr(space + 1);
    if (hours.find(' ') != std::string::npos) return bad(format);
  }
  if (!days.empty()) {
    const auto dash = days.find('-');
    const std::string first = days.substr(0, dash), last = dash == std::string::npos ? first : days.substr(dash + 1);
    const std::string days_are = "(Mon, Tue, Wed, Thu, Fri, Sat, Sun)";
    if (!ParseDay(first, &w.first_day)) return bad(fmt::format("unknown day '{}' {}", first, days_are));
    if (!ParseDay(last, &w.last_day)) return bad(fmt::format("unknown day '{}' {}", last, days_are));
  }
  const auto dash = hours.find('-');
  if (dash == std::string::npos) return bad(format);
  const std::string start = hours.substr(0, dash), end = hours.substr(dash + 1);
  if (!ParseClock(start, &w.start_min) || w.start_min == kMinutesPerDay)
    return bad(fmt::format("start '{}' is not a time from 00:00 to 23:59 ({})", start, format));
  if (!ParseClock(end, &w.end_min)) return bad(fmt::format("end '{}' is not a time from 00:00 to 24:00 ({})", end, format));
  if (w.start_min == w.end_min)
    return bad("starts and ends at the same time: for a whole day write 00:00-24:00");
  return w;
}

double LocalWeekSeconds(std::time_t epoch_s) {
  std::tm local{};
  localtime_r(&epoch_s, &local);
  const unsigned monday_based = static_cast<unsigned>((local.tm_wday + 6) % 7);
  return monday_based * 86400.0 + local.tm_hour * 3600.0 + local.tm_min * 60.0 + (local.tm_sec > 59 ? 59 : local.tm_sec);
}

}  // namespace gpulane
