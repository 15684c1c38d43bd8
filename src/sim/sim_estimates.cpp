#include "sim/sim_estimates.h"

#include "estimate/source.h"

namespace aegis {

namespace {
EstimateChainConfig with_durations(EstimateChainConfig c, const EngineConfig& engine) {
  c.duration_min_runs = engine.backfill ? engine.backfill_history_runs : 0;
  c.duration_quantile = engine.backfill_history_quantile;
  return c;
}
}  // namespace

SimEstimates::SimEstimates(const EngineConfig& engine, EstimateChainConfig c) : chain_(with_durations(c, engine)) {
  const auto s = parse_estimate_source(engine.estimator);
  active_ = s && (*s == EstimateSource::History || *s == EstimateSource::Auto);
  durations_ = engine.backfill && engine.backfill_history_runs > 0;
  chain_.set_server_models({kSimGpuModel});
}

namespace {
// As aegisd's (daemon_util.h): a trace with a user column gives each user a history of
// their own; without it (owner -1) the signature is the workload and GPU count alone.
std::string signature_of(const WorkloadProfile& w, const JobSpec& spec) {
  std::string sig = w.name + "#" + std::to_string(spec.num_gpus);
  return spec.owner >= 0 ? "user " + std::to_string(spec.owner) + ": " + sig : sig;
}
}  // namespace

void SimEstimates::submitted(JobSpec& spec, const WorkloadProfile& w) {
  if (!active()) return;
  std::string sig = signature_of(w, spec);
  if (active_) spec.estimates.history = chain_.history(sig);
  if (durations_) spec.predicted_duration = chain_.predicted_duration(sig);
  waiting_[sig].insert(spec.id);
  live_[spec.id] = {std::move(sig), w.peak_mib};
}

void SimEstimates::completed(JobId id, Lifecycle& life, Seconds t) {
  if (!active()) return;
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  const std::string sig = it->second.first;
  const MiB peak = it->second.second;
  live_.erase(it);
  auto& waiting = waiting_[sig];
  waiting.erase(id);
  if (durations_) learn_duration(sig, id, life, t, waiting);
  if (!active_) return;
  const auto before = chain_.history(sig);
  if (!chain_.completed({sig, kSimGpuModel, peak, std::nullopt})) return;
  const auto now = chain_.history(sig);
  if (now == before) return;
  // As aegisd's refresh: the queued jobs of the signature wait with the new figure.
  for (JobId q : waiting) {
    const LifeJob* lj = life.find(q);
    if (!lj || lj->state != JobState::Queued) continue;
    MemoryEstimates e = lj->spec().estimates;
    e.history = now;
    life.set_estimates(q, e);
  }
}

// As aegisd records a successful attempt's run time: the queued jobs of the signature wait
// with the new prediction.
void SimEstimates::learn_duration(const std::string& sig, JobId id, Lifecycle& life, Seconds t,
                                  const std::unordered_set<JobId>& waiting) {
  const LifeJob* done = life.find(id);
  if (!done || !done->current()) return;
  const auto before = chain_.predicted_duration(sig);
  chain_.completed_duration(sig, t - done->current()->launched_at);
  const auto now = chain_.predicted_duration(sig);
  if (now == before) return;
  for (JobId q : waiting) {
    const LifeJob* lj = life.find(q);
    if (lj && lj->state == JobState::Queued) life.set_predicted_duration(q, now);
  }
}

}  // namespace aegis
