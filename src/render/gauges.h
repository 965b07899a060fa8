#pragma once
// Bars and sparklines for terminal views (gpulane top): a value as a filled bar, and a series of
// readings over time as one character per time slice. Pure; unknown values are drawn as unknown,
// never as 0.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpulane {

/// The inside of a bar `cells` columns wide (no brackets), filled for `fraction` (0..1, clamped) of
/// its width: with `unicode`, full blocks and one eighth block for the remainder ("███▍   "), else
/// '|' per whole cell. An unknown fraction (nullopt) gives "n/a" padded with spaces.
std::string BarCells(std::optional<double> fraction, std::size_t cells, bool unicode);

/// One reading of a series: when, and its value (nullopt: the reading was not reported).
struct SparkPoint {
  double time_s = 0;            ///< seconds (any origin shared with the window)
  std::optional<double> value;  ///< in the unit of the scale's `max_value`
};

/// The time window a sparkline covers and its scale.
struct SparkWindow {
  double from_s = 0;       ///< start of the first cell, seconds
  double to_s = 0;         ///< end of the last cell, seconds
  std::size_t cells = 0;   ///< columns; each covers (to_s - from_s) / cells seconds
  double max_value = 100;  ///< the value drawn as a full cell (0 is the lowest glyph); > 0
  /// A cell without a reading of its own repeats the latest earlier reading when that is at most
  /// this many seconds before the cell's end (the sampler's interval exceeds a cell's length).
  double hold_s = 0;
};

/// The sparkline of `points` (time order) over `window`: per cell the mean of the known values
/// read in it, as one of 8 levels ("▁▂▃▄▅▆▇█"; without `unicode` "_.-:=+*#"), value / max_value
/// clamped to 0..1, 0 the lowest level. A cell with readings but no known value is '?'; a cell no
/// reading covers (before the history starts, a gap) is a space. Exactly window.cells columns.
std::string Sparkline(const std::vector<SparkPoint>& points, const SparkWindow& window, bool unicode);

}  // namespace gpulane
