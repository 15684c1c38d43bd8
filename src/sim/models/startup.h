// When a launched job first shows GPU activity. Log-normal through the published
// median (8.2 s) and p95 (20.6 s), capped at the published maximum (55.5 s):
// sigma = ln(p95 / median) / 1.645.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "sim/models/random.h"
#include "sim/sim_config.h"

namespace aegis {

// The draw's constants, worked out once per run: a simulation draws one delay per launch,
// and the two logarithms of the constants cost as much as the draw itself. Every delay
// is the same double as first_activity_delay's (the same operations on the same values).
struct FirstActivityDelay {
  explicit FirstActivityDelay(const SimConfig& c)
      : mu(std::log(c.first_activity_median_s)),
        sigma(std::log(c.first_activity_p95_s / c.first_activity_median_s) / 1.6448536269514722),
        max_s(c.first_activity_max_s) {}
  double mu, sigma;
  Seconds max_s;
  Seconds operator()(std::uint64_t seed, std::uint64_t job, std::uint64_t attempt) const {
    const double z = standard_normal(hash_keys(seed, job, attempt, 1), hash_keys(seed, job, attempt, 2));
    const double d = std::exp(mu + sigma * z);
    return max_s > 0 ? std::min(d, max_s) : d;
  }
};

inline Seconds first_activity_delay(const SimConfig& c, std::uint64_t seed, std::uint64_t job, std::uint64_t attempt) {
  return FirstActivityDelay(c)(seed, job, attempt);
}

}  // namespace aegis
