// Spread of simulated results over seeds (`aegis sim --seeds N`): per (trace, policy) and
// metric, the mean, least and greatest over the runs of seeds s..s+N-1. Two policies are
// "within the spread" when their min-max ranges overlap: their difference is not a result.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/metrics.h"

namespace aegis {

struct Spread {
  double mean = 0, min = 0, max = 0;
};

// Throws std::invalid_argument when `values` is empty.
Spread spread_of(std::span<const double> values);

// The ranges [min, max] overlap (touching counts): neither policy is ahead on every seed's
// range, so their difference is smaller than what the seed alone moves.
bool within_spread(const Spread& a, const Spread& b);

// One (trace, policy) over seeds, in seed order.
struct RunSpread {
  std::string trace, policy;
  std::vector<RunMetrics> per_seed;

  template <class T>
  Spread of(T RunMetrics::*field) const {
    std::vector<double> v;
    for (const auto& m : per_seed) v.push_back(static_cast<double>(m.*field));
    return spread_of(v);
  }
  // Per seed, this run's field over `base`'s of the same seed (0 where base's is not positive).
  std::vector<double> ratios(const RunSpread& base, double RunMetrics::*field) const;
  // Every metric the same under every seed: the seed did not reach this run.
  bool seed_invariant() const;
};

struct SeedSpread {
  std::vector<std::uint64_t> seeds;
  std::vector<RunSpread> runs;  // in the order of each seed's runs
  const RunSpread* find(const std::string& trace, const std::string& policy) const;
};

// per_seed[i] are the runs of seeds[i], the same (trace, policy) runs in the same order for
// every seed. Throws std::invalid_argument otherwise, or when there is no seed.
SeedSpread gather(std::vector<std::uint64_t> seeds, const std::vector<std::vector<RunMetrics>>& per_seed);

// Makespan over exclusive's of the same seed: per trace and seed, and their geometric mean
// over traces per seed. Empty when exclusive did not run on every trace.
struct NormalisedSpread {
  std::string policy;
  std::vector<std::vector<double>> per_trace;  // [trace][seed]
  std::vector<double> geomean;                 // [seed]
};
std::vector<NormalisedSpread> normalised(const SeedSpread& s, const std::vector<std::string>& traces,
                                         const std::vector<std::string>& policies);

// The pairs (in the given order) whose spreads overlap.
std::vector<std::pair<std::string, std::string>> pairs_within(
    const std::vector<std::pair<std::string, Spread>>& by_policy);

}  // namespace aegis
