// How ModelFeatures become the learned model's inputs: log counts (memory grows with them
// multiplicatively), layer counts, and a one-hot activation function whose unknown names
// share an "other" slot; standardised with the training data's mean and scale. The input
// list is part of a model file's format: a file made for other inputs is refused.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "estimate/features.h"

namespace aegis {

class FeatureEncoder {
 public:
  // Learns the vocabulary, the standardisation and the covered ranges from training data.
  static FeatureEncoder fit(std::span<const ModelFeatures> training);
  // Throws std::runtime_error naming the field under `where`.
  static FeatureEncoder from_json(const nlohmann::json& j, const std::string& where);
  nlohmann::json to_json() const;

  // Names of the continuous inputs, in order (the one-hot activation slots follow).
  static const std::vector<std::string>& continuous_inputs();
  std::size_t size() const { return mean_.size(); }
  const std::vector<std::string>& activations() const { return activations_; }

  // Standardised inputs; out.size() == size().
  void encode(const ModelFeatures& f, std::span<double> out) const;
  std::vector<double> encode(const ModelFeatures& f) const;

  // Why `f` lies outside what the training data covered (a continuous input beyond the
  // training range by more than a margin, or a layer type never seen); empty if inside.
  std::optional<std::string> outside(const ModelFeatures& f) const;

 private:
  std::vector<double> raw(const ModelFeatures& f) const;
  std::size_t activation_slot(const std::string& name) const;

  std::vector<std::string> activations_;  // training vocabulary; the "other" slot is last
  std::vector<std::string> layer_types_;  // lower-case layer types seen in training
  std::vector<double> mean_, scale_;      // per input
  std::vector<double> min_, max_;         // per continuous input, unstandardised
};

}  // namespace aegis
