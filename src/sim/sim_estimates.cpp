#include "sim/sim_estimates.h"

#include "estimate/source.h"

namespace aegis {

SimEstimates::SimEstimates(const EngineConfig& engine, EstimateChainConfig c) : chain_(c) {
  const auto s = parse_estimate_source(engine.estimator);
  active_ = s && (*s == EstimateSource::History || *s == EstimateSource::Auto);
  chain_.set_server_models({kSimGpuModel});
}

namespace {
std::string signature_of(const WorkloadProfile& w, int gpus) { return w.name + "#" + std::to_string(gpus); }
}  // namespace

void SimEstimates::submitted(JobSpec& spec, const WorkloadProfile& w) {
  if (!active_) return;
  std::string sig = signature_of(w, spec.num_gpus);
  spec.estimates.history = chain_.history(sig);
  waiting_[sig].insert(spec.id);
  live_[spec.id] = {std::move(sig), w.peak_mib};
}

void SimEstimates::completed(JobId id, Lifecycle& life) {
  if (!active_) return;
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  const std::string sig = it->second.first;
  const MiB peak = it->second.second;
  live_.erase(it);
  auto& waiting = waiting_[sig];
  waiting.erase(id);
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

}  // namespace aegis
