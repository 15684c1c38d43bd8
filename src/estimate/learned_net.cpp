#include "estimate/learned_net.h"
#include "estimate/model_file_error.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

namespace aegis {
namespace {

const nlohmann::json& object(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_object()) model_file_error(where.empty() ? key : where + "." + key, "expected an object");
  return j[key];
}

double number(const nlohmann::json& j, const std::string& key, const std::string& where, double lo, double hi,
              bool open) {
  const std::string w = where + "." + key;
  if (!j.contains(key) || !j[key].is_number()) model_file_error(w, "expected a number");
  const double v = j[key].get<double>();
  const bool ok = open ? (v > lo && v < hi) : (v >= lo && v <= hi);
  if (!std::isfinite(v) || !ok)
    model_file_error(w, "expected a number in " + std::string(open ? "(" : "[") + std::to_string(lo) + ", " +
               std::to_string(hi) + (open ? ")" : "]"));
  return v;
}

}  // namespace

double LearnedNet::regression_mib(const ModelFeatures& f) const {
  const auto out = regression.forward(encoder.encode(f));
  return std::exp(target_mean + target_scale * out[0]);
}

int LearnedNet::classification_bin(const ModelFeatures& f) const {
  const auto out = classifier.forward(encoder.encode(f));
  return static_cast<int>(std::max_element(out.begin(), out.end()) - out.begin());
}

nlohmann::json to_json(const LearnedNet& n) {
  return {{"format", kLearnedFormat},
          {"description",
           "GPU memory estimator (aegis): an MLP over model features; regression of a high quantile of the "
           "peak memory, and classification into memory bins. docs/estimators.md"},
          {"training", n.training},
          {"features", n.encoder.to_json()},
          {"regression",
           {{"quantile", n.quantile},
            {"target", "standardised natural log of peak memory in MiB"},
            {"target_mean", n.target_mean},
            {"target_scale", n.target_scale},
            {"network", to_json(n.regression)}}},
          {"classification",
           {{"bin_mib", n.bin_mib},
            {"bins", n.classifier.outputs()},
            {"estimate", "upper edge of the predicted bin"},
            {"network", to_json(n.classifier)}}}};
}

LearnedNet learned_net_from_json(const nlohmann::json& j) {
  if (!j.is_object()) model_file_error("model", "expected a JSON object");
  if (j.value("format", std::string()) != kLearnedFormat)
    model_file_error("format", std::string("expected \"") + kLearnedFormat + "\"");
  LearnedNet n;
  n.encoder = FeatureEncoder::from_json(object(j, "features", ""), "features");
  const auto& r = object(j, "regression", "");
  n.quantile = number(r, "quantile", "regression", 0, 1, true);
  n.target_mean = number(r, "target_mean", "regression", -1e6, 1e6, false);
  n.target_scale = number(r, "target_scale", "regression", 0, 1e6, true);
  n.regression = mlp_from_json(object(r, "network", "regression"), "regression.network");
  if (n.regression.outputs() != 1) model_file_error("regression.network", "expected one output");
  const auto& c = object(j, "classification", "");
  n.bin_mib = number(c, "bin_mib", "classification", 0, 1e9, true);
  n.classifier = mlp_from_json(object(c, "network", "classification"), "classification.network");
  if (n.classifier.outputs() < 1) model_file_error("classification.network", "expected at least one output");
  for (const auto* net : {&n.regression, &n.classifier})
    if (static_cast<std::size_t>(net->inputs()) != n.encoder.size())
      model_file_error(net == &n.regression ? "regression.network" : "classification.network",
          "expected " + std::to_string(n.encoder.size()) + " inputs (as many as the features)");
  if (j.contains("training")) n.training = j["training"];
  return n;
}

LearnedNet load_learned_net(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the model file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(path + ": not valid JSON (" + e.what() + ")");
  }
  try {
    return learned_net_from_json(j);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace aegis
