// The Lifecycle's side of holds (issue 32 items 3-4, lifecycle/holds.h): what schedule()
// asks before it places a queued job, and the memory readings an array's probe learns from.
#include "lifecycle/lifecycle.h"

#include <algorithm>
#include <fmt/format.h>

namespace aegis {

Holds::Lookup Lifecycle::lookup() {
  return [this](JobId id) { return jobs_.find(id); };
}

void Lifecycle::cancel_doomed(Seconds now, Effects& fx) {
  const auto find = lookup();
  // Until nothing changes: a cancelled job may doom the jobs that wait for it.
  for (bool again = true; again;) {
    again = false;
    for (auto* q : {&recovery_, &main_})
      for (std::size_t i = q->first(); i < q->end(); ++i) {
        LifeJob* j = q->at(i);
        if (!j) continue;
        if (auto why = holds_.doomed(*j, find)) {
          finish(*j, JobState::Cancelled, *why, now, fx, "cancelled");
          again = true;
        }
      }
  }
  holds_.begin_pass(find);
}

bool Lifecycle::held(LifeJob& j, Seconds now, Effects& fx) {
  std::vector<JobId> floored;
  std::optional<Seconds> wake;
  auto why = holds_.held(j, now, config_, lookup(), floored, wake);
  for (JobId id : floored)
    change(fx, id, "estimate",
           fmt::format("its array's probe peaked: needs {} MiB free (its peak and the margin)",
                       job(id).queued.recovery.floor_mib));
  if (wake) fx.wake_at = fx.wake_at ? std::min(*fx.wake_at, *wake) : *wake;
  if (!why) return false;
  j.reason = std::move(*why);
  return true;
}

std::optional<Seconds> Lifecycle::memory_seen(JobId id, MiB mib, Seconds t) {
  LifeJob* j = jobs_.find(id);
  if (!j || !j->holds_gpus() || !holds_.active()) return std::nullopt;
  holds_.memory(*j, mib, t, config_.anchor_plateau_tolerance_mib);
  return holds_.peak_due(*j, config_);
}

}  // namespace aegis
