// OOM recovery rules. The ladder is the published AEGIS rule; "retry" is CARMA's.
#pragma once
#include <memory>
#include <vector>

#include "sched/stage.h"

namespace aegis {

// Free-memory floors for a GPU of `total_mib`: `fractions` of it, with extra rungs
// inserted so that consecutive rungs are at most `max_step_mib` apart.
// On 40960 MiB with {0.25,0.5,0.75} and 8192: 10240, 18432, 20480, 28672, 30720.
std::vector<MiB> ladder_rungs(MiB total_mib, const std::vector<double>& fractions, MiB max_step_mib);

// After an OOM the new floor is the first rung strictly above max(current floor, the
// free memory the job had when placed); past the top rung the job runs alone; after an
// OOM alone it may only run alone on a larger GPU (needs_larger_gpu), and the engine
// stops it where there is none (on one server of equal GPUs: at once, as published).
std::unique_ptr<RecoveryRule> make_ladder_recovery(const EngineConfig& c);

// Retry under the same floor `retries` times, then alone; an OOM while alone stops it.
std::unique_ptr<RecoveryRule> make_retry_recovery(const EngineConfig& c);

std::unique_ptr<RecoveryRule> make_recovery(const EngineConfig& c);

// An OOM while alone: retry alone, only where more memory than it had is free.
std::variant<Requeue, Stop> needs_larger_gpu(const RunningJob& job, bool explain = true);

}  // namespace aegis
