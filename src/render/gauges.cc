#include "render/gauges.h"

#include <algorithm>
#include <cmath>

#include "util/display_width.h"

namespace gpulane {
namespace {

constexpr const char* kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
constexpr const char* kLevelsUnicode[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
constexpr char kLevelsAscii[] = "_.-:=+*#";

double Clamp01(double x) { return std::isnan(x) ? 0 : std::clamp(x, 0.0, 1.0); }

// The glyph of the level of `fraction` (0..1): 0 the lowest, 1 the highest.
std::string Level(double fraction, bool unicode) {
  const int level = static_cast<int>(std::lround(Clamp01(fraction) * 7));
  return unicode ? kLevelsUnicode[level] : std::string(1, kLevelsAscii[level]);
}

// What one cell shows: the readings taken in it.
struct Cell {
  int readings = 0;
  int known = 0;
  double sum = 0;
};

std::vector<Cell> CellsOf(const std::vector<SparkPoint>& points, const SparkWindow& w) {
  std::vector<Cell> cells(w.cells);
  const double length_s = (w.to_s - w.from_s) / static_cast<double>(w.cells);
  for (const SparkPoint& p : points) {
    if (p.time_s < w.from_s || p.time_s >= w.to_s) continue;
    auto i = static_cast<std::size_t>((p.time_s - w.from_s) / length_s);
    Cell& c = cells[std::min(i, w.cells - 1)];
    ++c.readings;
    if (p.value) ++c.known, c.sum += *p.value;
  }
  return cells;
}

}  // namespace

std::string BarCells(std::optional<double> fraction, std::size_t cells, bool unicode) {
  if (!fraction) return FitColumns("n/a", cells);
  const double filled = Clamp01(*fraction) * static_cast<double>(cells);
  auto whole = static_cast<std::size_t>(filled);
  std::string out;
  if (!unicode) {
    whole = std::min(cells, static_cast<std::size_t>(std::lround(filled)));
    return std::string(whole, '|') + std::string(cells - whole, ' ');
  }
  for (std::size_t i = 0; i < whole; ++i) out += "█";
  std::size_t used = whole;
  const int eighths = static_cast<int>((filled - static_cast<double>(whole)) * 8);
  if (used < cells && eighths > 0) out += kEighths[eighths], ++used;
  return out + std::string(cells - used, ' ');
}

std::string Sparkline(const std::vector<SparkPoint>& points, const SparkWindow& w, bool unicode) {
  if (w.cells == 0 || !(w.to_s > w.from_s) || !(w.max_value > 0)) return std::string(w.cells, ' ');
  const std::vector<Cell> cells = CellsOf(points, w);
  const double length_s = (w.to_s - w.from_s) / static_cast<double>(w.cells);
  std::string out;
  std::size_t next = 0;  // the first point after the cells drawn so far
  std::optional<SparkPoint> latest;  // the latest point before the cell being drawn ends
  for (std::size_t i = 0; i < w.cells; ++i) {
    const double end_s = w.from_s + length_s * static_cast<double>(i + 1);
    for (; next < points.size() && points[next].time_s < end_s; ++next) latest = points[next];
    const Cell& c = cells[i];
    if (c.known > 0) out += Level(c.sum / c.known / w.max_value, unicode);
    else if (c.readings > 0) out += '?';
    else if (latest && end_s - latest->time_s <= w.hold_s) out += latest->value ? Level(*latest->value / w.max_value, unicode) : "?";
    else out += ' ';
  }
  return out;
}

}  // namespace gpulane
