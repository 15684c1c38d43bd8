#include "sched/share_weights.h"

#include <cmath>
#include <fmt/format.h>
#include <set>

#include "core/param_table.h"

namespace aegis {

std::vector<std::pair<std::string, double>> parse_share_weights(std::string_view text, std::string_view field) {
  std::vector<std::pair<std::string, double>> out;
  std::set<std::string, std::less<>> names;
  std::size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view entry = param_detail::trim(text.substr(at, comma - at));
    at = comma + 1;
    if (entry.empty()) throw ConfigError(fmt::format("{}: an empty entry (want NAME:WEIGHT,...)", field));
    const std::size_t colon = entry.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      throw ConfigError(fmt::format("{}: '{}' is not NAME:WEIGHT", field, entry));
    const std::string name(param_detail::trim(entry.substr(0, colon)));
    const std::string w(param_detail::trim(entry.substr(colon + 1)));
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(w, &used);
      if (used != w.size()) throw std::invalid_argument(w);
    } catch (const std::exception&) {
      throw ConfigError(fmt::format("{}: '{}': the weight '{}' is not a number", field, entry, w));
    }
    // A weight of 0 would give its user no share at all: a job of it would wait forever.
    if (!(v > 0) || !std::isfinite(v))
      throw ConfigError(fmt::format("{}: '{}': the weight must be a positive number", field, entry));
    if (!names.insert(name).second) throw ConfigError(fmt::format("{}: '{}' is named twice", field, name));
    out.emplace_back(name, v);
    if (comma == text.size()) break;
  }
  return out;
}

}  // namespace aegis
