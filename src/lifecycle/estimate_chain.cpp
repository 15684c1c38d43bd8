#include "lifecycle/estimate_chain.h"

#include <algorithm>
#include <cmath>

#include "estimate/analytical.h"
#include "estimate/history.h"

namespace aegis {

void EstimateChain::set_calibrated(std::optional<CalibratedModel> m, std::map<std::string, UtilisationModel> u) {
  calibrated_ = std::move(m);
  utilisation_ = std::move(u);
}

void EstimateChain::restore(std::map<std::string, MiB> largest, std::map<std::string, PeaksByModel> peaks,
                            std::map<std::string, UtilsByModel> utils) {
  largest_ = std::move(largest);
  peaks_ = std::move(peaks);
  utils_ = std::move(utils);
}

bool EstimateChain::completed(const CompletedRun& r) {
  if (r.peak_mib <= 0) return false;
  const auto window = static_cast<std::size_t>(std::max(c_.history_window, 1));
  largest_[r.signature] = std::max(largest_[r.signature], r.peak_mib);
  auto& runs = peaks_[r.signature][r.gpu_model];
  runs.push_back(r.peak_mib);
  if (runs.size() > window) runs.erase(runs.begin());
  // The store keeps the last `window` runs, some without a utilisation: at most that many here.
  if (r.gpu_util && std::isfinite(*r.gpu_util)) {
    auto& utils = utils_[r.signature][r.gpu_model];
    utils.push_back(std::clamp(*r.gpu_util, 0.0, 1.0));
    if (utils.size() > window) utils.erase(utils.begin());
  }
  return true;
}

void EstimateChain::completed_duration(const std::string& signature, Seconds seconds) {
  if (c_.duration_min_runs <= 0 || !std::isfinite(seconds) || seconds <= 0) return;
  auto& runs = durations_[signature];
  runs.push_back(seconds);
  if (runs.size() > static_cast<std::size_t>(std::max(c_.history_window, 1))) runs.erase(runs.begin());
}

void EstimateChain::restore_durations(std::vector<PastRun> runs) {
  durations_.clear();
  // By end, as they completed (ties: as given); completed_duration keeps the window.
  std::ranges::stable_sort(runs, {}, &PastRun::ended_at);
  for (const auto& r : runs) completed_duration(r.signature, r.ended_at - r.launched_at);
}

// Not per GPU model: a job's run time on another model is not known from memory's context
// either, and a server's GPUs are alike for backfill (Placer::server_gpus).
std::optional<Seconds> EstimateChain::predicted_duration(const std::string& signature) const {
  if (c_.duration_min_runs <= 0) return std::nullopt;
  const auto it = durations_.find(signature);
  if (it == durations_.end() || it->second.size() < static_cast<std::size_t>(c_.duration_min_runs))
    return std::nullopt;
  return recent_share_statistic(it->second, c_.history_window, c_.duration_quantile);  // (any quantity)
}

// Per GPU model, a high quantile of its recent peaks there; a model it never ran on gets
// the most-run model's figure with the CUDA context swapped (calibrated model), or
// unchanged without one. Signatures recorded before per-model runs keep their largest peak.
std::optional<MiB> EstimateChain::history(const std::string& signature) const {
  if (auto it = peaks_.find(signature); it != peaks_.end()) {
    auto translate = [&](MiB mib, const std::string& from, const std::string& to) {
      if (!calibrated_) return mib;
      const double moved = static_cast<double>(mib) + calibrated_->context_mib(to) - calibrated_->context_mib(from);
      return static_cast<MiB>(std::ceil(std::max(moved, 0.0)));
    };
    return history_estimate(it->second, models_, c_.history_window, c_.history_quantile, translate);
  }
  if (auto h = largest_.find(signature); h != largest_.end()) return h->second;
  return std::nullopt;
}

// The learned model's figure, else the calibrated one on the server's GPU model that needs
// the most (a job may land on any of them).
std::optional<MiB> EstimateChain::learned(const ModelFeatures& f, bool half) const {
  if (learned_)
    if (auto m = learned_->regression(f)) return m;
  if (!calibrated_) return std::nullopt;
  double most = 0;
  for (const auto& g : models_) most = std::max(most, calibrated_->estimate(calibration_run(f, g, half), g).mib);
  return static_cast<MiB>(std::ceil(most));
}

MemoryEstimates EstimateChain::estimates(const ChainJob& j) const {
  MemoryEstimates e;
  e.declared = j.declared;
  e.profiled = j.profiled;
  e.faketensor = j.faketensor;
  e.history = history(j.signature);
  if (j.model) {
    e.analytical = static_cast<MiB>(std::ceil(horus_mib(*j.model)));
    e.learned = learned(*j.model, j.half);
  }
  return e;
}

PredictedUtilisation EstimateChain::predicted_utilisation(const ChainJob& j) const {
  static const UtilsByModel no_runs;
  const auto runs = utils_.find(j.signature);
  if (auto h = history_utilisation(runs == utils_.end() ? no_runs : runs->second, models_, c_.history_window,
                                   c_.history_util_quantile, c_.history_util_min_runs))
    return {h, "history"};
  if (j.model)
    if (auto m = utilisation_.find("gpu_util"); m != utilisation_.end())
      return {m->second.predict(calibration_run(*j.model, "", j.half)), "model-spec"};
  return {};
}

}  // namespace aegis
