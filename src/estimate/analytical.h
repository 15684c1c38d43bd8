// Analytical memory estimates from a model's counts (no framework, no data): the Horus
// formula as its artifact implements it, and a variant that adds what that formula
// leaves out (CUDA context, gradients, optimizer state). docs/estimators.md compares them.
#pragma once
#include "estimate/features.h"

namespace aegis {

// Horus (artifact): bytes = 4 * (A*B + P + B*P), A = activations per sample, B = batch
// size, P = parameters; returned in MiB (not rounded). The B*P term charges a copy of
// every parameter per sample; see docs/estimators.md for what it stands for.
double horus_mib(const ModelFeatures& f);

// What the full variant assumes. Defaults: fp32, Adam (two moment tensors per
// parameter), one gradient per parameter, a CUDA context of 400 MiB per process
// (background: 0.3 to 0.5 GiB).
struct AnalyticalAssumptions {
  double context_mib = 400;
  double bytes_per_value = 4;
  double gradient_copies = 1;
  double optimizer_copies = 2;  // Adam: exp_avg and exp_avg_sq; SGD with momentum: 1; plain SGD: 0
};

// context + bytes * (P * (1 + gradient_copies + optimizer_copies) + A*B), in MiB: weights,
// their gradients and optimizer state, and the activations kept for the backward pass.
double analytical_full_mib(const ModelFeatures& f, const AnalyticalAssumptions& a = {});

}  // namespace aegis
