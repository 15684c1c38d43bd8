// A small fully connected network: dense layers, ReLU or tanh between them, a linear
// output. Weights live in plain vectors so that this header needs no Eigen (the library
// links it privately); forward() maps them into Eigen. Same weights, same input: same bits.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace aegis {

enum class HiddenActivation { Relu, Tanh };

struct DenseLayer {
  int inputs = 0;
  int outputs = 0;
  std::vector<double> weight;  // outputs x inputs, row-major
  std::vector<double> bias;    // outputs
};

struct Mlp {
  std::vector<DenseLayer> layers;  // the activation follows every layer but the last
  HiddenActivation hidden = HiddenActivation::Relu;

  int inputs() const { return layers.empty() ? 0 : layers.front().inputs; }
  int outputs() const { return layers.empty() ? 0 : layers.back().outputs; }
  // The output for one input (x.size() == inputs(); checked only in debug builds).
  std::vector<double> forward(std::span<const double> x) const;
};

// Layer sizes {inputs, hidden..., outputs}; weights uniform with He (ReLU) or Glorot
// (tanh) bounds from a seeded generator, biases zero.
Mlp make_mlp(const std::vector<int>& sizes, HiddenActivation act, std::uint64_t seed);

std::string_view to_string(HiddenActivation a);
nlohmann::json to_json(const Mlp& m);
// Throws std::runtime_error naming the field under `where`, e.g.
// "regression.network.layers[1].weight: expected 4096 numbers, got 4000".
Mlp mlp_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace aegis
