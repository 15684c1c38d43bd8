#include "estimate/evaluation.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "estimate/analytical.h"
#include "estimate/rng.h"

namespace aegis {

std::vector<std::vector<std::size_t>> kfold_split(std::size_t rows, int folds, std::uint64_t seed) {
  if (folds < 2) throw std::invalid_argument("folds must be at least 2");
  if (rows < static_cast<std::size_t>(folds)) throw std::invalid_argument("fewer rows than folds");
  std::vector<std::size_t> order(rows);
  for (std::size_t i = 0; i < rows; ++i) order[i] = i;
  Rng(seed).shuffle(order);
  std::vector<std::vector<std::size_t>> out(static_cast<std::size_t>(folds));
  for (std::size_t i = 0; i < rows; ++i) out[i % out.size()].push_back(order[i]);
  for (auto& f : out) std::sort(f.begin(), f.end());
  return out;
}

nlohmann::json to_json(const EstimatorResult& r) {
  nlohmann::json j = {{"estimator", r.estimator}};
  j.update(to_json(r.metrics));
  j["overhead_us"] = r.overhead_us;
  return j;
}

KFoldResult evaluate_kfold(std::span<const MemorySample> samples, const KFoldOptions& o) {
  const auto folds = kfold_split(samples.size(), o.folds, o.seed);
  const std::size_t n = samples.size();
  std::vector<double> actual(n), reg(n), cls(n), horus(n), full(n);
  std::vector<char> in_bin(n, 0);
  KFoldResult res;
  double reg_us = 0, cls_us = 0;
  for (std::size_t k = 0; k < folds.size(); ++k) {
    std::vector<MemorySample> train;
    std::vector<char> held(n, 0);
    for (auto i : folds[k]) held[i] = 1;
    for (std::size_t i = 0; i < n; ++i)
      if (!held[i]) train.push_back(samples[i]);
    auto opts = o.train;
    opts.seed = derive_seed(o.seed, 100 + k);
    const LearnedNet net = train_learned(train, opts);

    std::vector<double> fa, fr, fc;
    std::vector<ModelFeatures> test;
    int hits = 0;
    for (auto i : folds[k]) {
      const auto& s = samples[i];
      test.push_back(s.features);
      actual[i] = s.memory_mib;
      reg[i] = net.regression_mib(s.features);
      const int bin = net.classification_bin(s.features);
      cls[i] = (bin + 1) * net.bin_mib;
      in_bin[i] = bin == static_cast<int>(std::floor(s.memory_mib / net.bin_mib));
      hits += in_bin[i];
      fa.push_back(actual[i]);
      fr.push_back(reg[i]);
      fc.push_back(cls[i]);
    }
    reg_us += microseconds_per_call<ModelFeatures>(test, [&](const ModelFeatures& f) { return net.regression_mib(f); }) /
              static_cast<double>(folds.size());
    cls_us += microseconds_per_call<ModelFeatures>(test, [&](const ModelFeatures& f) { return net.classification_mib(f); }) /
              static_cast<double>(folds.size());
    auto fold_cls = ratio_metrics(fc, fa);
    fold_cls.bin_accuracy = static_cast<double>(hits) / static_cast<double>(folds[k].size());
    res.folds.push_back({{"fold", k + 1},
                         {"train_rows", train.size()},
                         {"test_rows", folds[k].size()},
                         {"training_seed", opts.seed},
                         {"regression_report", net.training["regression_report"]},
                         {"classification_report", net.training["classification_report"]},
                         {"learned-regression", to_json(ratio_metrics(fr, fa))},
                         {"learned-classifier", to_json(fold_cls)}});
  }

  std::vector<ModelFeatures> all;
  for (std::size_t i = 0; i < n; ++i) {
    horus[i] = horus_mib(samples[i].features);
    full[i] = analytical_full_mib(samples[i].features);
    all.push_back(samples[i].features);
  }
  EstimatorResult c{"learned-classifier", ratio_metrics(cls, actual), cls_us};
  double hits = 0;
  for (char h : in_bin) hits += h;
  c.metrics.bin_accuracy = hits / static_cast<double>(n);
  res.estimators.push_back(c);
  res.estimators.push_back({"learned-regression", ratio_metrics(reg, actual), reg_us});
  res.estimators.push_back({"analytical", ratio_metrics(horus, actual),
                            microseconds_per_call<ModelFeatures>(all, [](const ModelFeatures& f) { return horus_mib(f); })});
  res.estimators.push_back(
      {"analytical+context+optimizer", ratio_metrics(full, actual),
       microseconds_per_call<ModelFeatures>(all, [](const ModelFeatures& f) { return analytical_full_mib(f); })});
  return res;
}

}  // namespace aegis
