#include "util/config_toml.h"

#include <cmath>

#include <fmt/format.h>

namespace gpulane {

Error ConfigBad(const std::string& path, const toml::source_region& where, std::string what) {
  for (char& c : what)
    if (c == '\n' || c == '\r') c = ' ';  // errors are one line
  return MakeError(ErrorKind::kInvalidArgument, fmt::format("{}:{}: {} (see docs/config.md)", path, where.begin.line, what));
}

std::optional<std::int64_t> ConfigInteger(const toml::node& node) {
  if (auto integer = node.as_integer()) return integer->get();
  if (auto number = node.as_floating_point()) {
    const double d = number->get();
    if (std::isfinite(d) && d == std::trunc(d) && d >= -9.0e18 && d <= 9.0e18) return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

}  // namespace gpulane
