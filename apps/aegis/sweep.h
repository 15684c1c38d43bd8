// Parameter grids for `aegis sim --sweep`: "smact=0.5:0.8:0.05,smocc=0.2:0.5:0.05" is the
// cartesian product of two axes. Axis names are engine or simulator parameters (`aegis
// config`), with short aliases for the pressure thresholds (smact, smocc, drama, util).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace aegis::cli {

struct SweepAxis {
  std::string name;  // full parameter name, "sim." prefix for simulator parameters
  std::vector<double> values;
};

using SweepPoint = std::vector<std::pair<std::string, double>>;

// Throws ConfigError naming the bad part.
std::vector<SweepAxis> parse_sweep(const std::string& spec);
std::vector<SweepPoint> grid(const std::vector<SweepAxis>& axes);

}  // namespace aegis::cli
