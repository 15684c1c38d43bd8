#include "sim/models/phases.h"

#include <fmt/format.h>

#include "sim/csv.h"

namespace aegis {

namespace {

// The column's value if present and not empty, else `fallback`; checked to lie in [0,1].
double level(const CsvReader& r, const std::string& col, double fallback) {
  if (!r.has_column(col)) return fallback;
  auto v = r.opt_double(col);
  if (!v) return fallback;
  if (*v < 0 || *v > 1) r.fail(col, fmt::format("{} is not in [0,1]", *v));
  return *v;
}

ActivityLevels levels(const CsvReader& r, const std::string& prefix, const ActivityLevels& fallback) {
  return {level(r, prefix + "smact", fallback.smact), level(r, prefix + "smocc", fallback.smocc),
          level(r, prefix + "drama", fallback.drama), level(r, prefix + "util", fallback.util)};
}

}  // namespace

JobPhases read_phases(const CsvReader& r, const ActivityLevels& whole) {
  JobPhases p;
  p.steady = levels(r, "steady_", whole);
  if (r.has_column("startup_s")) {
    if (auto s = r.opt_double("startup_s")) {
      if (*s < 0) r.fail("startup_s", fmt::format("{} must not be negative", *s));
      p.startup_s = *s;
    }
  }
  p.startup = levels(r, "startup_", ActivityLevels{});
  return p;
}

}  // namespace aegis
