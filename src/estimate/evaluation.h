// Seeded k-fold cross-validation of the memory estimators on measured runs: the learned
// heads are trained on k-1 folds and judged on the held-out one; the analytical formulas
// need no training and are judged on every run. Also: the time one estimate takes.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "estimate/learned_training.h"
#include "estimate/memory_sample.h"
#include "estimate/ratio_metrics.h"

namespace aegis {

struct EstimatorResult {
  std::string estimator;  // "learned-classifier", "learned-regression", "analytical", ...
  RatioMetrics metrics;   // pooled over the held-out folds
  double overhead_us = 0; // mean wall-clock microseconds per estimate (not deterministic)
};

struct KFoldOptions {
  int folds = 3;
  std::uint64_t seed = 7;  // the split; fold f trains with derive_seed(seed, 100 + f)
  LearnedTrainOptions train;
};

struct KFoldResult {
  std::vector<EstimatorResult> estimators;
  nlohmann::json folds = nlohmann::json::array();  // per fold: rows, training reports, figures
};

// Row indices of each fold after a seeded shuffle; sizes differ by at most one.
std::vector<std::vector<std::size_t>> kfold_split(std::size_t rows, int folds, std::uint64_t seed);

// Throws std::invalid_argument when folds < 2 or rows < folds.
KFoldResult evaluate_kfold(std::span<const MemorySample> samples, const KFoldOptions& o);

nlohmann::json to_json(const EstimatorResult& r);

// Mean wall-clock microseconds of one `estimate(x)` over `inputs`, repeated until at
// least `min_ms` have passed (results summed so the compiler keeps the calls).
template <class T, class F>
double microseconds_per_call(std::span<const T> inputs, F&& estimate, double min_ms = 50) {
  if (inputs.empty()) return 0;
  using clock = std::chrono::steady_clock;
  volatile double sink = 0;
  std::size_t calls = 0;
  const auto start = clock::now();
  double elapsed_ms = 0;
  do {
    double sum = 0;
    for (const auto& x : inputs) sum += estimate(x);
    sink = sink + sum;
    calls += inputs.size();
    elapsed_ms = std::chrono::duration<double, std::milli>(clock::now() - start).count();
  } while (elapsed_ms < min_ms);
  return elapsed_ms * 1000.0 / static_cast<double>(calls);
}

}  // namespace aegis
