// Utilisation estimation: a job's mean SM activity, SM occupancy, DRAM activity or coarse
// utilisation (each a share in [0, 1]) from its model spec, by a ridge regression on the
// logs of its size (parameters, activations of one batch, batch size), clamped to [0, 1].
// Evaluated leave-one-model-out with the mean absolute error and the rank correlation.
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "estimate/calibrated.h"

namespace aegis {

struct UtilisationModel {
  std::vector<double> coefficients;  // intercept, ln(1+P), ln(1+A*B), ln(B)
  double predict(const CalibrationRun& job) const;
};

// The targets by name ("gpu_util", "smact", "smocc", "drama") as the calibrated model file
// keeps them under "utilisation". from_json throws std::runtime_error naming the field.
nlohmann::json to_json(const std::map<std::string, UtilisationModel>& models);
std::map<std::string, UtilisationModel> utilisation_from_json(const nlohmann::json& j);

// Every model's runs weigh 1 together; `target` reads the measured share of a run.
UtilisationModel fit_utilisation(std::span<const CalibrationRun> runs, std::span<const double> target);

// One prediction per run, its model left out of the fit (NAN where target is NAN).
std::vector<double> utilisation_leave_one_model_out(std::span<const CalibrationRun> runs,
                                                    std::span<const double> target);
// The same for every run, measured or not: what a job of that model is predicted to do by
// a fit that never saw its model (the simulator's predicted utilisation).
std::vector<double> utilisation_predict_held_out(std::span<const CalibrationRun> runs,
                                                 std::span<const double> target);

// Lucid's sharing score from a predicted coarse utilisation: 0 (tiny: shares with any job)
// below `tiny_util`, else 2 (shares with tiny jobs only). Lucid's middle class (1) is not
// told apart by size, so no job is put in it (docs/estimators.md, "Sharing score").
int sharing_score_from_util(double util, double tiny_util);

struct AgreementMetrics {
  std::size_t n = 0;
  double mae = 0;       // mean |predicted - measured|
  double spearman = 0;  // rank correlation (average ranks for ties)
};
// Pairs with a NAN on either side are skipped.
AgreementMetrics agreement(std::span<const double> predicted, std::span<const double> measured);

}  // namespace aegis
