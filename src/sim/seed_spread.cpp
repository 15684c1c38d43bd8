#include "sim/seed_spread.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "sim/json_report.h"

namespace aegis {

Spread spread_of(std::span<const double> values) {
  if (values.empty()) throw std::invalid_argument("spread_of: no values");
  Spread s{0, values.front(), values.front()};
  for (double v : values) {
    s.mean += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  s.mean /= static_cast<double>(values.size());
  return s;
}

bool within_spread(const Spread& a, const Spread& b) { return a.min <= b.max && b.min <= a.max; }

std::vector<double> RunSpread::ratios(const RunSpread& base, double RunMetrics::*field) const {
  std::vector<double> out;
  for (std::size_t i = 0; i < per_seed.size() && i < base.per_seed.size(); ++i) {
    const double b = base.per_seed[i].*field;
    out.push_back(b > 0 ? per_seed[i].*field / b : 0.0);
  }
  return out;
}

bool RunSpread::seed_invariant() const {
  // Every figure the JSON records, compared as JSON: a new metric is covered without a list here.
  for (const auto& m : per_seed)
    if (to_json(m) != to_json(per_seed.front())) return false;
  return true;
}

const RunSpread* SeedSpread::find(const std::string& trace, const std::string& policy) const {
  for (const auto& r : runs)
    if (r.trace == trace && r.policy == policy) return &r;
  return nullptr;
}

SeedSpread gather(std::vector<std::uint64_t> seeds, const std::vector<std::vector<RunMetrics>>& per_seed) {
  if (seeds.empty() || seeds.size() != per_seed.size())
    throw std::invalid_argument("gather: one list of runs per seed, and at least one seed");
  SeedSpread s;
  s.seeds = std::move(seeds);
  for (const auto& m : per_seed.front()) s.runs.push_back({m.trace, m.policy, {}});
  for (const auto& runs : per_seed) {
    if (runs.size() != s.runs.size()) throw std::invalid_argument("gather: seeds with different runs");
    for (std::size_t k = 0; k < runs.size(); ++k) {
      if (runs[k].trace != s.runs[k].trace || runs[k].policy != s.runs[k].policy)
        throw std::invalid_argument("gather: seeds with runs in a different order");
      s.runs[k].per_seed.push_back(runs[k]);
    }
  }
  return s;
}

std::vector<NormalisedSpread> normalised(const SeedSpread& s, const std::vector<std::string>& traces,
                                         const std::vector<std::string>& policies) {
  std::vector<NormalisedSpread> out;
  std::vector<const RunSpread*> excl;
  for (const auto& t : traces) {
    excl.push_back(s.find(t, "exclusive"));
    if (!excl.back()) return out;
  }
  for (const auto& p : policies) {
    NormalisedSpread row{p, {}, std::vector<double>(s.seeds.size(), 0.0)};
    for (std::size_t t = 0; t < traces.size(); ++t) {
      const RunSpread* r = s.find(traces[t], p);
      if (!r) throw std::invalid_argument("normalised: no run of " + p + " on " + traces[t]);
      row.per_trace.push_back(r->ratios(*excl[t], &RunMetrics::makespan_s));
      for (std::size_t i = 0; i < s.seeds.size(); ++i) row.geomean[i] += std::log(row.per_trace.back()[i]);
    }
    for (double& g : row.geomean) g = std::exp(g / static_cast<double>(traces.size()));
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> pairs_within(
    const std::vector<std::pair<std::string, Spread>>& by_policy) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t i = 0; i < by_policy.size(); ++i)
    for (std::size_t j = i + 1; j < by_policy.size(); ++j)
      if (within_spread(by_policy[i].second, by_policy[j].second))
        out.push_back({by_policy[i].first, by_policy[j].first});
  return out;
}

}  // namespace aegis
