// How good a memory estimator is, as the scheduler feels it: the ratio estimate / actual
// per run (below 1 risks an out-of-memory crash, above 1 wastes memory others could use).
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

namespace aegis {

struct RatioMetrics {
  std::size_t n = 0;
  double median_ratio = 0;         // median of estimate / actual
  double p95_ratio = 0;            // 95th percentile of estimate / actual
  double underestimate_share = 0;  // share of runs with estimate < actual
  double mape = 0;                 // mean of |estimate - actual| / actual
  std::optional<double> bin_accuracy;  // classifiers: share of runs put in their true bin
};

// Pairs with a missing estimate or a non-positive actual are skipped (n counts the rest).
RatioMetrics ratio_metrics(std::span<const double> estimate, std::span<const double> actual);

// Percentile with linear interpolation between order statistics (numpy's default);
// q in [0, 1]. 0 for an empty input.
double percentile_of(std::vector<double> v, double q);

nlohmann::json to_json(const RatioMetrics& m);

}  // namespace aegis
