#include "estimate/ratio_metrics.h"

#include <algorithm>
#include <cmath>

namespace aegis {

double percentile_of(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

RatioMetrics ratio_metrics(std::span<const double> estimate, std::span<const double> actual) {
  RatioMetrics m;
  std::vector<double> ratios;
  double under = 0, ape = 0;
  for (std::size_t i = 0; i < std::min(estimate.size(), actual.size()); ++i) {
    if (!std::isfinite(estimate[i]) || !(actual[i] > 0)) continue;
    const double r = estimate[i] / actual[i];
    ratios.push_back(r);
    under += estimate[i] < actual[i] ? 1 : 0;
    ape += std::fabs(r - 1);
  }
  m.n = ratios.size();
  if (m.n == 0) return m;
  m.median_ratio = percentile_of(ratios, 0.5);
  m.p95_ratio = percentile_of(ratios, 0.95);
  m.underestimate_share = under / static_cast<double>(m.n);
  m.mape = ape / static_cast<double>(m.n);
  return m;
}

nlohmann::json to_json(const RatioMetrics& m) {
  nlohmann::json j = {{"n", m.n},
                      {"median_ratio", m.median_ratio},
                      {"p95_ratio", m.p95_ratio},
                      {"underestimate_share", m.underestimate_share},
                      {"mape", m.mape}};
  if (m.bin_accuracy) j["bin_accuracy"] = *m.bin_accuracy;
  return j;
}

}  // namespace aegis
