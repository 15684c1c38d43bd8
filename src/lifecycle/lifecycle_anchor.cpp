// Lifecycle::observe: aegisd's GPU readings in, first activities out (activity_anchor.h).
#include "lifecycle/lifecycle.h"

#include <algorithm>

namespace aegis {

Effects Lifecycle::observe(const ActivityReadings& readings, Seconds t) {
  Effects fx;
  // Each GPU's memory now, for judging an OOM by what was there just before it (memory_ledger.h).
  for (const auto& [gpu, free] : readings.gpu_free_mib) {
    GpuMemorySample m{t, free, {}};
    for (const auto& [id, seen] : readings.jobs)
      for (const JobGpuReading& r : seen)
        if (r.gpu == gpu) m.jobs[id] += r.mib;
    ledger_.record(gpu, std::move(m));
  }
  // The GPUs where some job still waits for its first activity, and how many there wait:
  // a GPU's activity rising is the job's only when it is the one waiting there.
  std::map<int, int> waiting_on;
  jobs_.for_each([&](const LifeJob& j) {
    if (j.holds_gpus() && !j.current()->first_activity)
      for (const auto& part : j.current()->placement.parts)
        for (int g : part.launch.gpus) ++waiting_on[g];
  });
  const AnchorSettings s{config_.anchor_process_util, config_.anchor_activity_rise, config_.anchor_sustained_samples,
                         config_.anchor_plateau_s, config_.anchor_plateau_tolerance_mib};
  for (const auto& [id, seen] : readings.jobs) {
    LifeJob* j = jobs_.find(id);
    if (!j || !j->holds_gpus()) continue;
    LifeAttempt& a = *j->current();
    if (holds_.active()) {  // [issue 32] an array's probe learns its peak from its memory
      MiB most = 0;
      for (const JobGpuReading& r : seen) most = std::max(most, r.mib);
      holds_.memory(*j, most, t, config_.anchor_plateau_tolerance_mib);
    }
    if (a.first_activity) continue;
    const auto& gpus = a.placement.parts.front().launch.gpus;
    std::optional<AnchorWatch::Found> found;
    for (const JobGpuReading& r : seen) {
      if (std::find(gpus.begin(), gpus.end(), r.gpu) == gpus.end()) continue;
      const auto act = readings.gpu_activity.find(r.gpu);
      auto f = a.watch.observe(t, r, act == readings.gpu_activity.end() ? std::nullopt : act->second,
                               waiting_on[r.gpu] == 1, s);
      if (f && (!found || f->at < found->at)) found = f;
    }
    if (!a.context_at) a.context_at = a.watch.context_at();
    if (found) fx.merge(first_activity(id, found->at, found->anchor));
  }
  return fx;
}

}  // namespace aegis
