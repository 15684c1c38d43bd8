// Trains an Mlp with Adam on shuffled mini-batches: the pinball (quantile) loss for a
// one-output regression, softmax cross-entropy for a classifier. Seeded and deterministic;
// keeps the weights of the epoch with the lowest loss on a seeded validation split.
#pragma once
#include <cstdint>
#include <vector>

#include "estimate/mlp.h"

namespace aegis {

struct TrainingSet {
  int features = 0;
  std::vector<double> x;  // rows x features, row-major, already standardised
  std::vector<double> y;  // regression target, or class index (0, 1, ...) for a classifier
  std::size_t rows() const { return y.size(); }
};

enum class LossKind { Pinball, CrossEntropy };

struct TrainOptions {
  LossKind loss = LossKind::Pinball;
  double quantile = 0.95;          // pinball only: the share of targets meant to lie below
  int max_epochs = 300;
  int patience = 60;               // epochs without a better validation loss before stopping
  int batch_size = 64;
  double learning_rate = 3e-3;     // cosine-decayed to final_learning_rate over max_epochs
  double final_learning_rate = 3e-5;
  double validation_share = 0.1;   // 0: no split, train max_epochs and keep the last weights
  std::uint64_t seed = 1;          // validation split and batch order
};

struct TrainReport {
  int epochs_run = 0;
  int best_epoch = 0;              // 1-based epoch whose weights were kept
  double train_loss = 0;           // on the training part, with the kept weights
  double validation_loss = 0;      // on the validation part (0 without one)
  std::size_t train_rows = 0, validation_rows = 0;
};

// Trains `net` in place (its sizes must match: inputs == set.features; outputs 1 for
// pinball, the number of classes for cross-entropy).
TrainReport train_mlp(Mlp& net, const TrainingSet& set, const TrainOptions& o);

// Mean loss of `net` over the whole set.
double mean_loss(const Mlp& net, const TrainingSet& set, LossKind loss, double quantile);

}  // namespace aegis
