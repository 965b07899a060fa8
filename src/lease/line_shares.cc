#include "lease/line_shares.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace gpulane::lease {

using nlohmann::json;

json LineSharesToJson(const sched::LineShares& shares) {
  json factors = json::object();
  for (const auto& [user, factor] : shares.factor_of_user) factors[user] = factor;
  return {{"written_s", shares.written_s},
          {"weight_fair_share", shares.weight_fair_share},
          {"weight_age", shares.weight_age},
          {"max_age_s", shares.max_age_s},
          {"factors", std::move(factors)}};
}

namespace {

bool NonNegative(const json& j, const char* key, double* out) {
  if (!j.contains(key) || !j[key].is_number()) return false;
  *out = j[key].get<double>();
  return std::isfinite(*out) && *out >= 0;
}

// Age in line at now_s of a ticket whose seq is `seq_ns` (never negative).
double AgeS(std::uint64_t seq_ns, double now_s) { return std::max(0.0, now_s - static_cast<double>(seq_ns) / 1e9); }

}  // namespace

std::optional<sched::LineShares> LineSharesFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  sched::LineShares s;
  if (!NonNegative(j, "written_s", &s.written_s) || !NonNegative(j, "weight_fair_share", &s.weight_fair_share) ||
      !NonNegative(j, "weight_age", &s.weight_age) || !NonNegative(j, "max_age_s", &s.max_age_s))
    return std::nullopt;
  if (!j.contains("factors") || !j["factors"].is_object()) return std::nullopt;
  for (const auto& [user, factor] : j["factors"].items()) {
    if (!factor.is_number()) return std::nullopt;
    const double f = factor.get<double>();
    if (!std::isfinite(f) || f < 0 || f > 1) return std::nullopt;
    s.factor_of_user[user] = f;
  }
  return s;
}

bool LineSharesFresh(const sched::LineShares& shares, double now_s) {
  return shares.written_s >= now_s - kLineSharesStaleS && shares.written_s <= now_s + 60;
}

bool LineSharesDiffer(const sched::LineShares& a, const sched::LineShares& b, double tolerance) {
  if (a.weight_fair_share != b.weight_fair_share || a.weight_age != b.weight_age || a.max_age_s != b.max_age_s ||
      a.factor_of_user.size() != b.factor_of_user.size())
    return true;
  for (const auto& [user, factor] : a.factor_of_user) {
    const auto it = b.factor_of_user.find(user);
    if (it == b.factor_of_user.end() || std::abs(it->second - factor) > tolerance) return true;
  }
  return false;
}

namespace {

// The line's order for tickets whose line priorities (LinePriority, or 0 without shares) are known.
bool Before(const TicketRecord& a, double priority_a, const TicketRecord& b, double priority_b) {
  return sched::LineBefore(TicketKey(a, priority_a), TicketKey(b, priority_b));
}

double PriorityIn(const sched::LineShares* shares, const TicketRecord& t, double now_s) {
  return shares ? sched::LinePriority(*shares, t.request.user, AgeS(t.seq, now_s)) : 0;
}

}  // namespace

bool LineBefore(const TicketRecord& a, const TicketRecord& b, const sched::LineShares* shares, double now_s) {
  return Before(a, PriorityIn(shares, a, now_s), b, PriorityIn(shares, b, now_s));
}

void SortLine(std::vector<TicketRecord>& tickets, const sched::LineShares* shares, double now_s) {
  std::vector<std::pair<double, TicketRecord>> keyed;
  keyed.reserve(tickets.size());
  for (auto& t : tickets) {
    const double p = PriorityIn(shares, t, now_s);
    keyed.emplace_back(p, std::move(t));
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& x, const auto& y) { return Before(x.second, x.first, y.second, y.first); });
  tickets.clear();
  for (auto& [p, t] : keyed) tickets.push_back(std::move(t));
}

}  // namespace gpulane::lease
