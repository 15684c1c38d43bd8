// The learned estimator as data: the feature encoder, the quantile-regression network and
// the 1 GiB-bin classifier, with a record of how they were trained. LearnedModel loads it
// from a file; training and the k-fold evaluation make it in memory.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "estimate/encoding.h"
#include "estimate/features.h"
#include "estimate/mlp.h"

namespace aegis {

inline constexpr const char* kLearnedFormat = "aegis-learned-memory/1";

struct LearnedNet {
  FeatureEncoder encoder;
  // Regression head: output o means exp(target_mean + target_scale * o) MiB, the
  // `quantile` of the peak memory given the features (trained with the pinball loss on
  // standardised log MiB).
  Mlp regression;
  double quantile = 0.95;
  double target_mean = 0, target_scale = 1;
  // Classifier head: class c means [c, c+1) * bin_mib; the estimate is the upper edge.
  Mlp classifier;
  double bin_mib = 1024;
  nlohmann::json training = nlohmann::json::object();  // data, date, seed, options, reports, metrics

  double regression_mib(const ModelFeatures& f) const;
  int classification_bin(const ModelFeatures& f) const;
  double classification_mib(const ModelFeatures& f) const { return (classification_bin(f) + 1) * bin_mib; }
};

nlohmann::json to_json(const LearnedNet& n);
// Throws std::runtime_error naming the field, e.g. "regression.quantile: expected a number in (0, 1)".
LearnedNet learned_net_from_json(const nlohmann::json& j);
// Reads a model file; throws std::runtime_error "<path>: <field>: <problem>".
LearnedNet load_learned_net(const std::string& path);

}  // namespace aegis
