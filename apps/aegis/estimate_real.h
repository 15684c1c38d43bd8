// `aegis estimate` on real networks: the calibrated memory estimator (fitted on the
// profiled catalog's measured peaks with data/aegis/workload_specs.csv, and GPUMemNet's
// MLPs), its leave-one-model-out table beside every other estimator, and the utilisation
// estimates' table (docs/estimators.md, "Real networks").
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "estimate/features.h"
#include "estimate/learned_net.h"

namespace aegis::cli {

inline const std::string kDefaultSpecs = "data/aegis/workload_specs.csv";
inline const std::string kDefaultCalibrated = "data/models/calibrated_memory.json";

// Prints one row of ratio metrics (n, median, p95, under, MAPE) per estimator in `names`,
// each against `peaks`, under a header row naming the first column `title`; returns them.
nlohmann::json print_ratio_table(const std::string& title, const std::vector<std::string>& names,
                                 const std::map<std::string, std::vector<double>>& estimates,
                                 const std::vector<double>& peaks, int width, int decimals);

// Prints the leave-one-model-out tables (memory and utilisation); returns their figures.
// `learned` (may be null): the shipped learned model, a row of its own (it never saw these
// networks, so every one is held out), estimating only inside its coverage.
nlohmann::json evaluate_real_networks(const std::string& workloads, const std::string& specs,
                                      const std::vector<std::string>& mlp_files, const LearnedNet* learned);

// `aegis estimate calibrate`: fits the calibrated model on everything and writes it.
void add_calibrate_estimator(CLI::App& est, const std::vector<std::string>& default_mlp_files);

// The calibrated estimate of a spec on a GPU model: printed, or as JSON.
nlohmann::json calibrated_prediction(const ModelFeatures& f, const std::string& model_file, const std::string& gpu);

}  // namespace aegis::cli
