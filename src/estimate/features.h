// What the learned estimator needs to know about a model (GPUMemNet's MLP features):
// from the training data (data/gpumemnet), from a model-spec JSON written by
// scripts/model_spec.py, or from `aegis submit --model-spec`.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

namespace aegis {

struct ModelFeatures {
  int depth = 0;                    // layers with weights, as the dataset counts them
  double total_activations = 0;     // activations per sample (all layers)
  double total_parameters = 0;
  int batch_size = 0;
  int batchnorm_layers = 0;
  int dropout_layers = 0;
  std::string activation;           // "ReLU", "Tanh", "GELU", ...
  std::map<std::string, int> layer_counts;  // "linear", "conv2d", ... (optional)
};

// From the model-spec JSON object (docs/estimators.md). The error names the field:
// "batch_size: must be a positive integer".
std::variant<ModelFeatures, std::string> features_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ModelFeatures& f);

}  // namespace aegis
