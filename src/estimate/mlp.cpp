#include "estimate/mlp.h"
#include "estimate/model_file_error.h"

#include <Eigen/Core>
#include <cassert>
#include <cmath>
#include <stdexcept>

#include "estimate/rng.h"

namespace aegis {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<double> numbers(const nlohmann::json& j, const std::string& where, std::size_t n) {
  if (!j.is_array()) model_file_error(where, "expected an array of numbers");
  if (j.size() != n) model_file_error(where, "expected " + std::to_string(n) + " numbers, got " + std::to_string(j.size()));
  std::vector<double> out;
  out.reserve(n);
  for (const auto& v : j) {
    if (!v.is_number()) model_file_error(where, "expected numbers only");
    const double d = v.get<double>();
    if (!std::isfinite(d)) model_file_error(where, "expected finite numbers");
    out.push_back(d);
  }
  return out;
}

int positive_int(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<long long>() < 1 ||
      j[key].get<long long>() > 1000000)
    model_file_error(where + "." + key, "expected a positive integer");
  return j[key].get<int>();
}

}  // namespace

std::vector<double> Mlp::forward(std::span<const double> x) const {
  assert(static_cast<int>(x.size()) == inputs());
  Eigen::VectorXd h = Eigen::Map<const Eigen::VectorXd>(x.data(), static_cast<Eigen::Index>(x.size()));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const auto& L = layers[l];
    const Eigen::Map<const RowMatrix> w(L.weight.data(), L.outputs, L.inputs);
    const Eigen::Map<const Eigen::VectorXd> b(L.bias.data(), L.outputs);
    Eigen::VectorXd z = w * h + b;
    if (l + 1 < layers.size()) {
      if (hidden == HiddenActivation::Relu) z = z.cwiseMax(0.0);
      else z = z.array().tanh().matrix();
    }
    h = std::move(z);
  }
  return {h.data(), h.data() + h.size()};
}

Mlp make_mlp(const std::vector<int>& sizes, HiddenActivation act, std::uint64_t seed) {
  if (sizes.size() < 2) throw std::invalid_argument("make_mlp: need at least input and output sizes");
  Rng rng(seed);
  Mlp m;
  m.hidden = act;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    DenseLayer L;
    L.inputs = sizes[i];
    L.outputs = sizes[i + 1];
    // He keeps ReLU activations' variance through depth; Glorot suits tanh.
    const double bound = act == HiddenActivation::Relu ? std::sqrt(6.0 / L.inputs)
                                                       : std::sqrt(6.0 / (L.inputs + L.outputs));
    L.weight.resize(static_cast<std::size_t>(L.inputs) * static_cast<std::size_t>(L.outputs));
    for (auto& w : L.weight) w = rng.uniform(-bound, bound);
    L.bias.assign(static_cast<std::size_t>(L.outputs), 0.0);
    m.layers.push_back(std::move(L));
  }
  return m;
}

std::string_view to_string(HiddenActivation a) { return a == HiddenActivation::Relu ? "relu" : "tanh"; }

nlohmann::json to_json(const Mlp& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& L : m.layers)
    layers.push_back({{"inputs", L.inputs}, {"outputs", L.outputs}, {"weight", L.weight}, {"bias", L.bias}});
  return {{"hidden_activation", to_string(m.hidden)}, {"layers", layers}};
}

Mlp mlp_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) model_file_error(where, "expected an object");
  Mlp m;
  const auto act = j.value("hidden_activation", std::string());
  if (act == "relu") m.hidden = HiddenActivation::Relu;
  else if (act == "tanh") m.hidden = HiddenActivation::Tanh;
  else model_file_error(where + ".hidden_activation", "expected \"relu\" or \"tanh\"");
  if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].empty())
    model_file_error(where + ".layers", "expected a non-empty array");
  for (std::size_t i = 0; i < j["layers"].size(); ++i) {
    const auto& lj = j["layers"][i];
    const std::string w = where + ".layers[" + std::to_string(i) + "]";
    if (!lj.is_object()) model_file_error(w, "expected an object");
    DenseLayer L;
    L.inputs = positive_int(lj, "inputs", w);
    L.outputs = positive_int(lj, "outputs", w);
    if (!m.layers.empty() && m.layers.back().outputs != L.inputs)
      model_file_error(w + ".inputs", "expected " + std::to_string(m.layers.back().outputs) + " (the previous layer's outputs)");
    L.weight = numbers(lj.value("weight", nlohmann::json()), w + ".weight",
                       static_cast<std::size_t>(L.inputs) * static_cast<std::size_t>(L.outputs));
    L.bias = numbers(lj.value("bias", nlohmann::json()), w + ".bias", static_cast<std::size_t>(L.outputs));
    m.layers.push_back(std::move(L));
  }
  return m;
}

}  // namespace aegis
