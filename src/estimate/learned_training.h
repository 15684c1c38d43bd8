// Trains the learned estimator (both heads) on measured runs. Seeded: the same samples,
// options and seed give the same weights, bit for bit, on the same build.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "estimate/learned_net.h"
#include "estimate/memory_sample.h"
#include "estimate/mlp.h"

namespace aegis {

struct LearnedTrainOptions {
  std::uint64_t seed = 1;
  double quantile = 0.95;           // regression head: the quantile of memory it learns
  double bin_mib = 1024;            // classifier head: bin width (GPUMemNet: 1 GiB for MLPs)
  std::vector<int> hidden = {64, 64};
  HiddenActivation activation = HiddenActivation::Relu;
  int max_epochs = 300;
  int patience = 60;
  int batch_size = 64;
  double learning_rate = 3e-3;
  double validation_share = 0.1;    // seeded split for early stopping
};

nlohmann::json to_json(const LearnedTrainOptions& o);

// Throws std::invalid_argument on empty input or bad options. The result's `training`
// holds the options and per-head reports; the caller adds the data's description.
LearnedNet train_learned(std::span<const MemorySample> samples, const LearnedTrainOptions& o);

}  // namespace aegis
