#include "apps/aegis/sweep.h"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "core/param_table.h"
#include "sched/config_params.h"
#include "sim/sim_config.h"

namespace aegis::cli {

namespace {

std::string full_name(const std::string& n) {
  if (n == "smact" || n == "smocc" || n == "drama" || n == "util") return n + "_threshold";
  return n;
}

double number(const std::string& part, const std::string& text) {
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v))
    throw ConfigError(fmt::format("--sweep: '{}': '{}' is not a number", part, text));
  return v;
}

// Checks the name exists (and the values are acceptable) by setting it on a scratch config.
void check(const std::string& name, double value) {
  const std::string text = fmt::format("{}", value);
  if (name.rfind("sim.", 0) == 0) {
    SimConfig s;
    set_param(s, name.substr(4), text);
  } else {
    EngineConfig e;
    set_param(e, name, text);
  }
}

}  // namespace

std::vector<SweepAxis> parse_sweep(const std::string& spec) {
  std::vector<SweepAxis> axes;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string part = spec.substr(pos, comma - pos);
    pos = comma + 1;
    const auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(fmt::format("--sweep: '{}' is not NAME=FROM:TO:STEP", part));
    SweepAxis a{full_name(part.substr(0, eq)), {}};
    const std::string range = part.substr(eq + 1);
    const auto c1 = range.find(':'), c2 = range.find(':', c1 == std::string::npos ? c1 : c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos)
      throw ConfigError(fmt::format("--sweep: '{}' is not NAME=FROM:TO:STEP", part));
    const double from = number(part, range.substr(0, c1)), to = number(part, range.substr(c1 + 1, c2 - c1 - 1)),
                 step = number(part, range.substr(c2 + 1));
    if (!(step > 0) || to < from) throw ConfigError(fmt::format("--sweep: '{}': needs FROM <= TO and STEP > 0", part));
    const auto n = static_cast<long>(std::floor((to - from) / step + 1e-9)) + 1;
    if (n > 10000) throw ConfigError(fmt::format("--sweep: '{}' has {} values; at most 10000", part, n));
    for (long i = 0; i < n; ++i) {
      const double v = std::round((from + static_cast<double>(i) * step) * 1e9) / 1e9;
      check(a.name, v);
      a.values.push_back(v);
    }
    for (const auto& b : axes)
      if (b.name == a.name) throw ConfigError(fmt::format("--sweep: '{}' appears twice", a.name));
    axes.push_back(std::move(a));
  }
  if (axes.empty()) throw ConfigError("--sweep: needs at least one NAME=FROM:TO:STEP");
  return axes;
}

std::vector<SweepPoint> grid(const std::vector<SweepAxis>& axes) {
  std::vector<SweepPoint> points{SweepPoint{}};
  for (const auto& a : axes) {
    std::vector<SweepPoint> next;
    for (const auto& p : points)
      for (double v : a.values) {
        auto q = p;
        q.push_back({a.name, v});
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

}  // namespace aegis::cli
