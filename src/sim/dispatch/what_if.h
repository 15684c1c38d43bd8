// What-ifs for a job held back by the pressure filter: the server's engine asked, through
// its ServerPlacer, whether it would start the job were some GPUs' windows other than
// they are (their floor, or some samples on), to tell when to ask again. State stays.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "sched/engine.h"
#include "sched/window_stats_source.h"
#include "sim/world/state.h"
#include "sim/world/telemetry.h"

namespace aegis::simrun {

class PressureWhatIf {
 public:
  PressureWhatIf(ClusterState& st, TelemetryWindows& windows, int window_samples)
      : st_(st), windows_(windows), n_(window_samples) {}

  // True if the engine refuses `job` on `srv` at t even with these GPUs' windows at the
  // component-wise minimum of their samples and current value: then no later window of
  // this quiet period can pass. Valid only when every stage's refusals are monotone.
  bool refused_at_floor(Server& srv, const QueuedJob& job, Seconds t, std::span<const int> locals);
  // With falling windows (TelemetryWindows::falling), the first later sample, 1 to the
  // window's length, at which the engine would start `job` if nothing happened until
  // then, found by bisection (the verdict only turns once); 0 if none does.
  std::int64_t first_passing_sample(Server& srv, const QueuedJob& job, Seconds t, std::span<const int> locals);

 private:
  class OverriddenWindows;
  bool refused_with(Server& srv, const QueuedJob& job, Seconds t, OverriddenWindows& windows);

  ClusterState& st_;
  TelemetryWindows& windows_;
  int n_;              // samples in a window
  Decisions answer_;   // refused_with's answer, kept for its storage
};

}  // namespace aegis::simrun
