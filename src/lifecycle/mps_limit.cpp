#include "lifecycle/mps_limit.h"

#include <algorithm>

#include "estimate/source.h"

namespace aegis {

std::optional<MiB> mps_memory_limit(const EngineConfig& config, const QueuedJob& job, const Placement& placement) {
  if (placement.exclusive() || placement.parts.empty()) return std::nullopt;
  const auto source = parse_estimate_source(config.estimator).value_or(EstimateSource::None);
  if (select_estimate(job.spec.estimates, source)) return placement.admitted_mib() + config.memory_margin_mib;
  const auto& e = job.spec.estimates;
  if (e.declared || e.history) {
    const MiB own = std::max(e.declared.value_or(0), e.history.value_or(0));
    return std::max(own, job.recovery.floor_mib) + config.memory_margin_mib;
  }
  // The smallest free memory over its GPUs (each part is one server's).
  MiB free = placement.parts.front().launch.free_at_placement;
  for (const auto& part : placement.parts) free = std::min(free, part.launch.free_at_placement);
  return std::max(free, placement.admitted_mib());
}

}  // namespace aegis
