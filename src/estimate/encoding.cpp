#include "estimate/encoding.h"
#include "estimate/model_file_error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <set>
#include <stdexcept>

namespace aegis {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Parameter-free reshaping layers are harmless whether or not training saw them.
bool reshaping(const std::string& type) { return type == "flatten" || type == "unflatten"; }

std::vector<double> numbers(const nlohmann::json& j, const std::string& key, const std::string& where,
                            std::size_t n) {
  const std::string w = where + "." + key;
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != n)
    model_file_error(w, fmt::format("expected an array of {} numbers", n));
  std::vector<double> out;
  for (const auto& v : j[key]) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) model_file_error(w, "expected finite numbers");
    out.push_back(v.get<double>());
  }
  return out;
}

std::vector<std::string> strings(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const std::string w = where + "." + key;
  if (!j.contains(key) || !j[key].is_array()) model_file_error(w, "expected an array of strings");
  std::vector<std::string> out;
  for (const auto& v : j[key]) {
    if (!v.is_string() || v.get<std::string>().empty()) model_file_error(w, "expected non-empty strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

const std::vector<std::string>& FeatureEncoder::continuous_inputs() {
  static const std::vector<std::string> names = {
      "log1p_total_parameters", "log1p_total_activations", "log1p_activations_x_batch",
      "log1p_batch_size",       "depth",                   "batchnorm_layers",
      "dropout_layers"};
  return names;
}

std::vector<double> FeatureEncoder::raw(const ModelFeatures& f) const {
  return {std::log1p(f.total_parameters),
          std::log1p(f.total_activations),
          std::log1p(f.total_activations * f.batch_size),
          std::log1p(static_cast<double>(f.batch_size)),
          static_cast<double>(f.depth),
          static_cast<double>(f.batchnorm_layers),
          static_cast<double>(f.dropout_layers)};
}

std::size_t FeatureEncoder::activation_slot(const std::string& name) const {
  const auto key = lower(name);
  for (std::size_t i = 0; i < activations_.size(); ++i)
    if (lower(activations_[i]) == key) return i;
  return activations_.size();  // "other"
}

FeatureEncoder FeatureEncoder::fit(std::span<const ModelFeatures> training) {
  if (training.empty()) throw std::invalid_argument("FeatureEncoder::fit: no training data");
  FeatureEncoder e;
  std::set<std::string> acts, types;
  for (const auto& f : training) {
    acts.insert(f.activation);
    for (const auto& [t, n] : f.layer_counts)
      if (n > 0) types.insert(lower(t));
  }
  e.activations_.assign(acts.begin(), acts.end());
  e.layer_types_.assign(types.begin(), types.end());
  const std::size_t nc = continuous_inputs().size(), n = nc + e.activations_.size() + 1;
  e.mean_.assign(n, 0);
  e.scale_.assign(n, 0);
  e.min_.assign(nc, std::numeric_limits<double>::infinity());
  e.max_.assign(nc, -std::numeric_limits<double>::infinity());
  // Unstandardised inputs of every row (one-hot slots as 0/1), then mean and deviation.
  std::vector<std::vector<double>> rows;
  rows.reserve(training.size());
  for (const auto& f : training) {
    auto r = e.raw(f);
    for (std::size_t i = 0; i < nc; ++i) {
      e.min_[i] = std::min(e.min_[i], r[i]);
      e.max_[i] = std::max(e.max_[i], r[i]);
    }
    r.resize(n, 0.0);
    r[nc + e.activation_slot(f.activation)] = 1.0;
    rows.push_back(std::move(r));
  }
  const double count = static_cast<double>(rows.size());
  for (const auto& r : rows)
    for (std::size_t i = 0; i < n; ++i) e.mean_[i] += r[i] / count;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < n; ++i) e.scale_[i] += (r[i] - e.mean_[i]) * (r[i] - e.mean_[i]) / count;
  for (auto& s : e.scale_) s = s > 1e-12 ? std::sqrt(s) : 1.0;  // constant inputs stay centred at 0
  return e;
}

void FeatureEncoder::encode(const ModelFeatures& f, std::span<double> out) const {
  const auto r = raw(f);
  const std::size_t nc = r.size();
  for (std::size_t i = 0; i < nc; ++i) out[i] = (r[i] - mean_[i]) / scale_[i];
  const std::size_t hot = nc + activation_slot(f.activation);
  for (std::size_t i = nc; i < out.size(); ++i) out[i] = ((i == hot ? 1.0 : 0.0) - mean_[i]) / scale_[i];
}

std::vector<double> FeatureEncoder::encode(const ModelFeatures& f) const {
  std::vector<double> out(size());
  encode(f, out);
  return out;
}

std::optional<std::string> FeatureEncoder::outside(const ModelFeatures& f) const {
  static const char* shown[] = {"total_parameters", "total_activations", "total_activations x batch_size",
                                "batch_size",       "depth",             "batchnorm_layers",
                                "dropout_layers"};
  const auto r = raw(f);
  for (std::size_t i = 0; i < r.size(); ++i) {
    // A margin of a tenth of the covered range (at least 0.5: a factor 1.6 on log inputs,
    // half a layer on counts): the network interpolates, it does not extrapolate.
    const double margin = std::max(0.5, 0.1 * (max_[i] - min_[i]));
    if (r[i] >= min_[i] - margin && r[i] <= max_[i] + margin) continue;
    const bool log_input = i < 4;
    auto show = [&](double v) { return log_input ? fmt::format("{:.4g}", std::expm1(v)) : fmt::format("{:g}", v); };
    return fmt::format("{} = {} is outside the training range {} to {}", shown[i], show(r[i]), show(min_[i]),
                       show(max_[i]));
  }
  for (const auto& [type, n] : f.layer_counts) {
    const auto t = lower(type);
    if (n > 0 && !reshaping(t) && !std::binary_search(layer_types_.begin(), layer_types_.end(), t))
      return fmt::format("layer type '{}' never occurs in the training data (which has only {})", type,
                         fmt::join(layer_types_, ", "));
  }
  return std::nullopt;
}

nlohmann::json FeatureEncoder::to_json() const {
  return {{"continuous_inputs", continuous_inputs()},
          {"activation_vocabulary", activations_},
          {"layer_types", layer_types_},
          {"mean", mean_},
          {"scale", scale_},
          {"min", min_},
          {"max", max_}};
}

FeatureEncoder FeatureEncoder::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) model_file_error(where, "expected an object");
  FeatureEncoder e;
  if (strings(j, "continuous_inputs", where) != continuous_inputs())
    model_file_error(where + ".continuous_inputs",
        fmt::format("this model was made for other inputs (this build uses {})", fmt::join(continuous_inputs(), ", ")));
  e.activations_ = strings(j, "activation_vocabulary", where);
  e.layer_types_ = strings(j, "layer_types", where);
  std::sort(e.layer_types_.begin(), e.layer_types_.end());
  const std::size_t nc = continuous_inputs().size(), n = nc + e.activations_.size() + 1;
  e.mean_ = numbers(j, "mean", where, n);
  e.scale_ = numbers(j, "scale", where, n);
  for (auto s : e.scale_)
    if (s <= 0) model_file_error(where + ".scale", "expected positive numbers");
  e.min_ = numbers(j, "min", where, nc);
  e.max_ = numbers(j, "max", where, nc);
  return e;
}

}  // namespace aegis
