#include "sim/plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::sim {

namespace {

// Colour-blind-safe (Okabe-Ito), one per policy in order.
constexpr const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A chart's frame: 640 x 300 drawing area at (60, 20) inside a 720 x 360 SVG.
constexpr double kLeft = 60, kTop = 20, kWidth = 640, kHeight = 300;

std::string Axes(const std::string& x_label, const std::string& y_label) {
  return fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>"
      "<text x=\"{}\" y=\"355\" text-anchor=\"middle\">{}</text>"
      "<text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>",
      kLeft, kTop, kWidth, kHeight, kLeft + kWidth / 2, Escape(x_label), kTop + kHeight / 2, kTop + kHeight / 2,
      Escape(y_label));
}

std::string Tick(double x, double y, const std::string& text, bool vertical_axis) {
  return vertical_axis ? fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\">{}</text>", x - 4, y + 4,
                                     Escape(text))
                       : fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\">{}</text>", x,
                                     y + 14, Escape(text));
}

std::string Polyline(const std::vector<std::pair<double, double>>& points, const char* colour) {
  std::string out = fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" points=\"", colour);
  for (const auto& [x, y] : points) out += fmt::format("{:.1f},{:.1f} ", x, y);
  out += "\"/>";
  return out;
}

std::string Legend(const std::vector<PolicySeries>& runs) {
  std::string out;
  for (std::size_t i = 0; i < runs.size(); ++i)
    out += fmt::format(
        "<span style=\"color:{};margin-right:1.2em\">&#9632; {}</span>", kColours[i % std::size(kColours)],
        Escape(runs[i].name));
  return "<p>" + out + "</p>";
}

// Wait CDF on a log axis from 1 s to the longest wait (waits under 1 s are drawn at 1 s).
std::string CdfChart(const std::vector<Job>& jobs, const std::vector<PolicySeries>& runs) {
  double longest = 1;
  std::vector<std::vector<std::pair<double, double>>> cdfs;
  for (const PolicySeries& r : runs) {
    cdfs.push_back(WaitCdf(jobs, r.outcomes));
    if (!cdfs.back().empty()) longest = std::max(longest, cdfs.back().back().first);
  }
  const double decades = std::max(1.0, std::ceil(std::log10(longest)));
  auto x_of = [&](double wait_s) { return kLeft + kWidth * std::log10(std::max(1.0, wait_s)) / decades; };
  auto y_of = [&](double fraction) { return kTop + kHeight * (1 - fraction); };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"360\" font-family=\"sans-serif\">";
  svg += Axes("wait (log scale; under 1 s drawn at 1 s)", "fraction of jobs that waited at most this long");
  for (int d = 0; d <= static_cast<int>(decades); ++d)
    svg += Tick(x_of(std::pow(10.0, d)), kTop + kHeight, FormatSeconds(std::pow(10.0, d)), false);
  for (int q = 0; q <= 4; ++q) svg += Tick(kLeft, y_of(q / 4.0), fmt::format("{:.2f}", q / 4.0), true);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::pair<double, double>> points;
    double previous = 0;
    for (const auto& [wait, fraction] : cdfs[i]) {
      points.emplace_back(x_of(wait), y_of(previous));  // a step: flat, then up
      points.emplace_back(x_of(wait), y_of(fraction));
      previous = fraction;
    }
    points.emplace_back(kLeft + kWidth, y_of(previous));
    svg += Polyline(points, kColours[i % std::size(kColours)]);
  }
  return svg + "</svg>";
}

std::string UtilisationChart(const std::vector<Job>& jobs, const std::vector<PolicySeries>& runs, unsigned gpus,
                             std::uint64_t gpu_mem_bytes) {
  constexpr std::size_t kBins = 200;
  double longest_s = 1;
  std::vector<std::vector<double>> series;
  std::vector<double> widths;
  for (const PolicySeries& r : runs) {
    double bin_s = 0;
    series.push_back(UtilisationOverTime(jobs, r.outcomes, gpus, gpu_mem_bytes, kBins, &bin_s));
    widths.push_back(bin_s);
    longest_s = std::max(longest_s, bin_s * static_cast<double>(series.back().size()));
  }
  auto x_of = [&](double t_s) { return kLeft + kWidth * t_s / longest_s; };
  auto y_of = [&](double fraction) { return kTop + kHeight * (1 - fraction); };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"360\" font-family=\"sans-serif\">";
  svg += Axes("time since the first submission", "GPUs busy (fraction, mean per bin)");
  for (int q = 0; q <= 4; ++q) {
    svg += Tick(x_of(longest_s * q / 4), kTop + kHeight, FormatSeconds(longest_s * q / 4), false);
    svg += Tick(kLeft, y_of(q / 4.0), fmt::format("{:.2f}", q / 4.0), true);
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::pair<double, double>> points;
    for (std::size_t b = 0; b < series[i].size(); ++b) points.emplace_back(x_of((b + 0.5) * widths[i]), y_of(series[i][b]));
    svg += Polyline(points, kColours[i % std::size(kColours)]);
  }
  return svg + "</svg>";
}

}  // namespace

std::vector<std::pair<double, double>> WaitCdf(const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes,
                                               std::size_t max_points) {
  std::vector<double> waits;
  waits.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size() && i < outcomes.size(); ++i) waits.push_back(outcomes[i].start_s - jobs[i].submit_s);
  std::sort(waits.begin(), waits.end());
  std::vector<std::pair<double, double>> all;
  const double n = static_cast<double>(waits.size());
  for (std::size_t k = 0; k < waits.size(); ++k)
    if (k + 1 == waits.size() || waits[k + 1] != waits[k]) all.emplace_back(waits[k], static_cast<double>(k + 1) / n);
  if (all.size() <= max_points || max_points < 2) return all;
  std::vector<std::pair<double, double>> out;
  const double step = static_cast<double>(all.size() - 1) / static_cast<double>(max_points - 1);
  for (std::size_t p = 0; p < max_points; ++p) out.push_back(all[static_cast<std::size_t>(std::llround(p * step))]);
  out.back() = all.back();
  return out;
}

std::vector<double> UtilisationOverTime(const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes, unsigned gpus,
                                        std::uint64_t gpu_mem_bytes, std::size_t bins, double* bin_s) {
  *bin_s = 0;
  if (jobs.empty() || bins == 0 || gpus == 0) return {};
  double first = jobs.front().submit_s, last = first;
  for (std::size_t i = 0; i < jobs.size() && i < outcomes.size(); ++i) {
    first = std::min(first, jobs[i].submit_s);
    last = std::max(last, outcomes[i].end_s);
  }
  const double width = std::max(last - first, 1e-9) / static_cast<double>(bins);
  *bin_s = width;
  std::vector<double> busy(bins, 0);  // GPU-seconds per bin
  for (std::size_t i = 0; i < jobs.size() && i < outcomes.size(); ++i) {
    const double share = GpuShare(jobs[i], gpu_mem_bytes);
    const double a = outcomes[i].start_s - first, b = outcomes[i].end_s - first;
    if (b <= a) continue;
    const std::size_t from = std::min(bins - 1, static_cast<std::size_t>(a / width));
    const std::size_t to = std::min(bins - 1, static_cast<std::size_t>(b / width));
    for (std::size_t k = from; k <= to; ++k) {
      const double lo = std::max(a, k * width), hi = std::min(b, (k + 1) * width);
      if (hi > lo) busy[k] += share * (hi - lo);
    }
  }
  for (double& v : busy) v /= width * gpus;
  return busy;
}

std::string PlotHtml(const std::string& title, const std::vector<Job>& jobs, const std::vector<PolicySeries>& runs,
                     unsigned gpus, std::uint64_t gpu_mem_bytes) {
  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + Escape(title) +
                     "</title></head>\n<body style=\"font-family:sans-serif\">\n<h1 style=\"font-size:1.2em\">" +
                     Escape(title) + "</h1>\n";
  html += Legend(runs) + "\n<h2 style=\"font-size:1em\">Waits: CDF</h2>\n" + CdfChart(jobs, runs) + "\n";
  html += "<h2 style=\"font-size:1em\">GPU utilisation over time</h2>\n" + UtilisationChart(jobs, runs, gpus, gpu_mem_bytes) + "\n";
  html += "<p style=\"font-size:0.8em\">gpulane simulate: one line per policy; the same trace and machine for each.</p>\n";
  return html + "</body></html>\n";
}

}  // namespace gpulane::sim
