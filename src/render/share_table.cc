#include "render/share_table.h"

#include <algorithm>
#include <fmt/format.h>

#include "util/terminal_text.h"

namespace gpulane {

nlohmann::json ShareRowsToJson(const std::vector<sched::UserShare>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows)
    out.push_back({{"user", r.user}, {"share", r.share}, {"share_norm", r.share_norm}, {"usage_gpu_s", r.usage_gpu_s},
                   {"usage_norm", r.usage_norm}, {"fair_share", r.factor}});
  return out;
}

std::vector<sched::UserShare> ShareRowsFromJson(const nlohmann::json& rows) {
  std::vector<sched::UserShare> out;
  if (!rows.is_array()) return out;
  auto number = [](const nlohmann::json& row, const char* key) {
    auto it = row.find(key);
    return it != row.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  for (const auto& row : rows) {
    if (!row.is_object()) continue;
    sched::UserShare u;
    u.user = row.value("user", "");
    u.share = number(row, "share");
    u.share_norm = number(row, "share_norm");
    u.usage_gpu_s = number(row, "usage_gpu_s");
    u.usage_norm = number(row, "usage_norm");
    u.factor = number(row, "fair_share");
    out.push_back(std::move(u));
  }
  return out;
}

std::string ShareTableText(std::vector<sched::UserShare> rows, double half_life_s) {
  std::sort(rows.begin(), rows.end(), [](const sched::UserShare& a, const sched::UserShare& b) {
    if (a.factor != b.factor) return a.factor < b.factor;
    return a.user < b.user;
  });
  constexpr const char* kRow = "{:<16} {:>8} {:>8} {:>14} {:>8} {:>10}\n";
  std::string out = fmt::format(kRow, "USER", "SHARE", "SHARE%", "USAGE", "USAGE%", "FAIRSHARE");
  for (const auto& r : rows)
    out += fmt::format(kRow, EscapeForTerminal(r.user), fmt::format("{:g}", r.share), fmt::format("{:.1f}", 100 * r.share_norm),
                       sched::UsageText(r.usage_gpu_s), fmt::format("{:.1f}", 100 * r.usage_norm), fmt::format("{:.3f}", r.factor));
  out += fmt::format("usage: GPU time decayed with a half-life of {} (a --mem job counts its fraction of a GPU's memory); "
                     "fair share = 2^(-usage% / share%)\n",
                     sched::HalfLifeText(half_life_s));
  return out;
}

}  // namespace gpulane
