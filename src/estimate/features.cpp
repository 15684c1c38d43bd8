// The model-spec JSON <-> ModelFeatures. Strict on purpose: a spec with a typo in a field
// name would otherwise be estimated with a zero in its place, and a wrong estimate is
// worse than an error.
#include "estimate/features.h"

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

namespace aegis {
namespace {

constexpr std::array<std::string_view, 8> kFields = {
    "depth", "total_activations", "total_parameters", "batch_size",
    "batchnorm_layers", "dropout_layers", "activation", "layer_counts"};

std::string known_fields() {
  std::string s;
  for (auto f : kFields) s += (s.empty() ? "" : ", ") + std::string(f);
  return s;
}

// An integer in [lo, INT_MAX]; JSON floats are refused even when whole ("2.0" is
// usually a sign that the writer computed something it should have counted).
std::optional<int> as_int(const nlohmann::json& v, long long lo) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned()) {
    const auto u = v.get<unsigned long long>();
    // Parsed JSON holds every non-negative integer as unsigned: the lower bound applies here too.
    if (u > static_cast<unsigned long long>(std::numeric_limits<int>::max()) || static_cast<long long>(u) < lo)
      return std::nullopt;
    return static_cast<int>(u);
  }
  const auto i = v.get<long long>();
  if (i < lo || i > std::numeric_limits<int>::max()) return std::nullopt;
  return static_cast<int>(i);
}

// A finite number >= 0 (counts of activations and parameters exceed int range).
std::optional<double> as_count(const nlohmann::json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0) return std::nullopt;
  return d;
}

// Counts are doubles (they can exceed 2^31) but are whole numbers in practice: written
// as JSON integers so that specs read naturally ("total_parameters": 1083897).
nlohmann::json count_json(double d) {
  if (d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<long long>(d);
  return d;
}

}  // namespace

std::variant<ModelFeatures, std::string> features_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::string("model spec: must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (auto f : kFields) known = known || key == f;
    if (!known) return key + ": unknown field (expected " + known_fields() + ")";
  }
  for (auto f : {"depth", "total_activations", "total_parameters", "batch_size", "activation"})
    if (!j.contains(f)) return std::string(f) + ": missing (required)";

  ModelFeatures f;
  if (auto v = as_int(j["depth"], 1)) f.depth = *v;
  else return std::string("depth: must be a positive integer");
  if (auto v = as_int(j["batch_size"], 1)) f.batch_size = *v;
  else return std::string("batch_size: must be a positive integer");
  if (auto v = as_count(j["total_activations"])) f.total_activations = *v;
  else return std::string("total_activations: must be a number >= 0");
  if (auto v = as_count(j["total_parameters"])) f.total_parameters = *v;
  else return std::string("total_parameters: must be a number >= 0");
  if (j.contains("batchnorm_layers")) {
    if (auto v = as_int(j["batchnorm_layers"], 0)) f.batchnorm_layers = *v;
    else return std::string("batchnorm_layers: must be an integer >= 0");
  }
  if (j.contains("dropout_layers")) {
    if (auto v = as_int(j["dropout_layers"], 0)) f.dropout_layers = *v;
    else return std::string("dropout_layers: must be an integer >= 0");
  }
  const auto& act = j["activation"];
  if (!act.is_string() || act.get<std::string>().empty())
    return std::string("activation: must be a non-empty string (e.g. \"ReLU\")");
  f.activation = act.get<std::string>();
  if (j.contains("layer_counts")) {
    const auto& lc = j["layer_counts"];
    if (!lc.is_object()) return std::string("layer_counts: must be an object of layer type -> count");
    for (const auto& [type, n] : lc.items()) {
      if (type.empty()) return std::string("layer_counts: layer type names must be non-empty");
      if (auto v = as_int(n, 0)) f.layer_counts[type] = *v;
      else return "layer_counts." + type + ": must be an integer >= 0";
    }
  }
  return f;
}

nlohmann::json to_json(const ModelFeatures& f) {
  nlohmann::json j = {{"depth", f.depth},
                      {"total_activations", count_json(f.total_activations)},
                      {"total_parameters", count_json(f.total_parameters)},
                      {"batch_size", f.batch_size},
                      {"batchnorm_layers", f.batchnorm_layers},
                      {"dropout_layers", f.dropout_layers},
                      {"activation", f.activation}};
  if (!f.layer_counts.empty()) j["layer_counts"] = f.layer_counts;
  return j;
}

}  // namespace aegis
