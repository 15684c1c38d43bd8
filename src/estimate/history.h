// The history estimator: a job's signature (its command with numbers normalised, working
// directory, GPU count and tags), and the peak GPU memory and mean activity recorded for
// earlier runs with the same signature, per GPU model. Repeated jobs are the common case
// on a shared server.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/units.h"

namespace aegis {

// "python train.py --lr 0.01 --seed 3" and "... --lr 0.02 --seed 4" share a signature.
std::string job_signature(const std::vector<std::string>& argv, const std::string& workdir, int gpus,
                          std::vector<std::string> tags);

// The command with every run of digits (and decimal numbers) replaced by '#'.
std::string normalise_numbers(const std::string& s);

// A high quantile of the last `window` peaks (oldest first), by nearest rank rounding up:
// with few runs it is their largest, and one stray run among many stops counting once
// the window has moved past it. Empty when there are none.
std::optional<MiB> recent_peak_statistic(std::span<const MiB> peaks, int window, double quantile);

// The history estimate of a job that may land on any of `server_models` (GPU model names),
// from its signature's peaks per GPU model: the largest, over those models, of that
// model's statistic, or, for a model without runs of its own, the statistic of the model
// with the most runs moved across by `translate(mib, from, to)`. Empty without any peak.
std::optional<MiB> history_estimate(
    const std::map<std::string, std::vector<MiB>>& peaks_by_model, const std::vector<std::string>& server_models,
    int window, double quantile, const std::function<MiB(MiB, const std::string&, const std::string&)>& translate);

// What one completed run did on its GPUs, each a mean share in [0, 1] over the samples
// that could be told apart as its own (docs/estimators.md, "Utilisation from history");
// empty where the GPU's telemetry does not give the metric or no sample qualified.
struct RunActivity {
  std::optional<double> gpu_util;  // coarse utilisation (per process where NVML gives it)
  std::optional<double> smact;     // SM activity
  std::optional<double> smocc;     // SM occupancy
  std::optional<double> drama;     // DRAM activity
};

// recent_peak_statistic for shares (utilisation).
std::optional<double> recent_share_statistic(std::span<const double> shares, int window, double quantile);

// The utilisation history of a job that may land on any of `server_models`: the largest,
// over those models, of that model's statistic of its last `window` runs. Empty unless
// every one of them has at least `min_runs` runs: utilisation is not moved across GPU
// models (a newer GPU is busy a different share of the time; nothing here tells by how much).
std::optional<double> history_utilisation(const std::map<std::string, std::vector<double>>& utils_by_model,
                                          const std::vector<std::string>& server_models, int window,
                                          double quantile, int min_runs);

}  // namespace aegis
