#pragma once
// Weekly time windows for partitions (docs/config.md, [partitions.NAME] windows), in the
// machine's local time: "Mon-Fri 08:00-20:00", "Sat 10:00-14:00", "20:00-08:00" (every day).
// A window whose end is not after its start crosses midnight: "Mon-Sun 20:00-08:00" is open from
// 20:00 on each of those days until 08:00 the next morning. Times are whole minutes.
// The parsing is here (not in sched/) so that the config file can refuse a bad window with its
// line; sched/partition.h decides with it.
#include <ctime>
#include <string>

#include "util/result.h"

namespace gpulane {

inline constexpr unsigned kMinutesPerDay = 24 * 60;
inline constexpr unsigned kMinutesPerWeek = 7 * kMinutesPerDay;
inline constexpr double kSecondsPerWeek = kMinutesPerWeek * 60.0;

/// One window: on each day first_day..last_day (0 = Monday .. 6 = Sunday; wraps when last_day <
/// first_day, "Fri-Mon"), open from start_min to end_min (minutes after that day's midnight,
/// 0..1440), or, when end_min <= start_min, to end_min on the next day.
struct WeekWindow {
  unsigned first_day = 0;
  unsigned last_day = 6;
  unsigned start_min = 0;
  unsigned end_min = kMinutesPerDay;
  std::string text;  ///< as written in the config
};

/// "[DAY[-DAY] ]HH:MM-HH:MM" (days: Mon Tue Wed Thu Fri Sat Sun, any case; no days: every day;
/// 24:00 allowed as an end). Errors: kInvalidArgument naming the problem and the fix
/// ("'Mon-Fry 08:00-20:00': unknown day 'Fry' (Mon, Tue, Wed, Thu, Fri, Sat, Sun)").
Result<WeekWindow> ParseWeekWindow(const std::string& text);

/// "Mon" .. "Sun" for 0..6.
const char* DayName(unsigned day);

/// Seconds since Monday 00:00 local time at `epoch_s` (seconds since the epoch), in [0, 604800):
/// the machine's time zone (TZ, /etc/localtime) through localtime_r. Across a daylight-saving
/// change, a duration derived from two such values is off by the shift.
double LocalWeekSeconds(std::time_t epoch_s);

}  // namespace gpulane
