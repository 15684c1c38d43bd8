// The simulator's side of the estimate chain (lifecycle/estimate_chain.h), as aegisd feeds
// it: a job's signature is its workload and GPU count (a repeated command), and its user
// when the trace has a user column (aegisd's signature has the uid); each completed
// attempt teaches the chain its workload's peak, and the queued jobs of that signature wait
// with the new history estimate. Only a policy whose estimator reads history pays for it.
// With backfill (issue 32 item 5) each successful attempt also teaches the chain its
// duration, and the queued jobs of its signature wait with backfill's predicted duration.
#pragma once
#include <map>
#include <string>
#include <unordered_set>

#include "lifecycle/estimate_chain.h"
#include "lifecycle/lifecycle.h"
#include "sched/config.h"
#include "sim/workload.h"

namespace aegis {

class SimEstimates {
 public:
  explicit SimEstimates(const EngineConfig& engine, EstimateChainConfig c = {});
  bool active() const { return active_ || durations_; }
  // At arrival: the history estimate of its signature, if any run of it completed.
  void submitted(JobSpec& spec, const WorkloadProfile& w);
  // Its attempt completed (the simulated job reached its workload's peak): learn, and
  // refresh the queued jobs of its signature in `life`. `t`: when it completed (its
  // attempt's launch is in `life`).
  void completed(JobId id, Lifecycle& life, Seconds t);

 private:
  void learn_duration(const std::string& sig, JobId id, Lifecycle& life, Seconds t,
                      const std::unordered_set<JobId>& waiting);
  bool active_ = false;
  bool durations_ = false;  // backfill with backfill_history_runs: learn and predict durations
  EstimateChain chain_;
  std::map<JobId, std::pair<std::string, MiB>> live_;        // submitted, not completed: signature, peak
  std::map<std::string, std::unordered_set<JobId>> waiting_;  // signature -> jobs submitted, not completed
};

// The simulator's GPU model name for the chain: every simulated GPU is one model to it
// (history is not moved across GPU models without a calibrated model anyway).
inline constexpr const char* kSimGpuModel = "simulated";

}  // namespace aegis
