// The estimate chain, the same in aegisd and the simulator: from what a job says of itself
// (the user's figures, a model spec) and what earlier runs of its signature did on this
// server's GPU models, the memory estimates a policy's estimator picks from (estimate/source.h:
// declared, history, learned or calibrated, else the floor) and its predicted utilisation.
// Pure: drivers load the models and any stored history and feed it; it learns from
// completed attempts (docs/estimators.md, "The estimate chain").
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "estimate/calibrated.h"
#include "estimate/features.h"
#include "estimate/learned.h"
#include "estimate/utilisation.h"

namespace aegis {

// Its numbers are the daemon's parameters of the same names (docs/config.md).
struct EstimateChainConfig {
  int history_window = 10;            // runs per signature and GPU model read
  double history_quantile = 0.9;      // of their peaks (nearest rank, rounding up)
  double history_util_quantile = 0.5; // of their utilisation
  int history_util_min_runs = 1;      // runs with a utilisation on every GPU model before it is used
  // Backfill's predicted duration (issue 32 item 5): the engine's backfill_history_runs and
  // backfill_history_quantile, which the drivers copy here. 0 runs: no prediction.
  int duration_min_runs = 3;
  double duration_quantile = 0.9;
};

// What a driver knows of a job when it asks.
struct ChainJob {
  std::string signature;               // estimate/history.h's job_signature, or the driver's equivalent
  std::optional<MiB> declared, profiled, faketensor;
  std::optional<ModelFeatures> model;  // its model spec, if given
  bool half = false;                   // bf16/fp16 activations (calibrated estimator)
};

// One attempt that completed: what it used, on the GPU model of its first GPU.
struct CompletedRun {
  std::string signature;
  std::string gpu_model;
  MiB peak_mib = 0;                  // nothing is learned from 0 (its processes were never seen)
  std::optional<double> gpu_util;    // its mean coarse utilisation, if measured
};

// A successful attempt recorded before this start (aegisd's store): backfill's durations
// are rebuilt from these, so they survive a restart (issue 32).
struct PastRun {
  std::string signature;
  Seconds launched_at = 0, ended_at = 0;
};

struct PredictedUtilisation {
  std::optional<double> value;
  std::string source;  // "history", "model-spec" (the calibrated model's prediction), or empty
};

class EstimateChain {
 public:
  using PeaksByModel = std::map<std::string, std::vector<MiB>>;
  using UtilsByModel = std::map<std::string, std::vector<double>>;

  explicit EstimateChain(EstimateChainConfig c = {}) : c_(c) {}

  // --- what the driver loads ------------------------------------------------------------
  void set_server_models(std::vector<std::string> models) { models_ = std::move(models); }
  const std::vector<std::string>& server_models() const { return models_; }
  void set_learned(std::optional<LearnedModel> m) { learned_ = std::move(m); }
  // Fills the learned slot where the learned model is absent or refuses; its per-GPU-model
  // contexts move history across GPU models; `utilisation` predicts from a model spec.
  void set_calibrated(std::optional<CalibratedModel> m, std::map<std::string, UtilisationModel> utilisation = {});
  // Stored history (oldest first): the largest peak per signature from before per-model
  // runs were kept, and the per-model runs.
  void restore(std::map<std::string, MiB> largest, std::map<std::string, PeaksByModel> peaks,
               std::map<std::string, UtilsByModel> utils);
  // Backfill's durations, rebuilt from successful runs in any order: each signature keeps
  // its last history_window by end, as if completed_duration had seen them (replacing what
  // was learnt). Nothing is kept while predictions are off.
  void restore_durations(std::vector<PastRun> runs);
  bool predicts_durations() const { return c_.duration_min_runs > 0; }

  // --- the event it learns from -----------------------------------------------------------
  // Returns whether anything was learned (the driver then refreshes its queued jobs of
  // that signature).
  bool completed(const CompletedRun& r);
  // An attempt of `signature` that completed successfully ran `seconds` (from its launch):
  // kept for backfill's prediction, the last history_window of them.
  void completed_duration(const std::string& signature, Seconds seconds);

  // --- answers ----------------------------------------------------------------------------
  // Every figure the chain can give: the job's own, analytical (Horus) and learned (the
  // learned model, else the calibrated one on the server's neediest GPU model) from a
  // model spec, and history. The policy's estimator picks one (select_estimate).
  MemoryEstimates estimates(const ChainJob& j) const;
  // A high quantile of its signature's recent peaks per GPU model (history_estimate).
  std::optional<MiB> history(const std::string& signature) const;
  // Its signature's history of utilisation, else the calibrated model's prediction from its spec.
  PredictedUtilisation predicted_utilisation(const ChainJob& j) const;
  // Backfill's prediction of how long a job of `signature` runs: duration_quantile of its
  // last history_window successful runs (nearest rank, rounding up), once it has
  // duration_min_runs of them; the lifecycle caps it by the job's limit (backfill.h).
  std::optional<Seconds> predicted_duration(const std::string& signature) const;
  // The learned slot alone (estimates().learned).
  std::optional<MiB> learned(const ModelFeatures& f, bool half = false) const;

 private:
  EstimateChainConfig c_;
  std::vector<std::string> models_;
  std::optional<LearnedModel> learned_;
  std::optional<CalibratedModel> calibrated_;
  std::map<std::string, UtilisationModel> utilisation_;
  std::map<std::string, MiB> largest_;            // signature -> largest peak (before per-model runs)
  std::map<std::string, PeaksByModel> peaks_;     // signature -> GPU model -> last peaks
  std::map<std::string, UtilsByModel> utils_;     // signature -> GPU model -> last utilisations
  std::map<std::string, std::vector<Seconds>> durations_;  // signature -> last successful runs' durations
};

}  // namespace aegis
