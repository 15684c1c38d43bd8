// The engine's whole input: the world at one instant and the job to place, owned by the driver.
#pragma once
#include <limits>
#include <span>

#include "core/decision.h"
#include "core/gpu.h"
#include "core/job.h"
#include "core/running.h"
#include "sched/stage.h"
#include "sched/window_stats_source.h"
#include "telemetry/risk.h"

namespace aegis {

// What the running jobs put on one GPU, as the engine sums it from Snapshot::running
// (Engine::add_load, in running order). A driver that keeps these in step with its
// running jobs (the simulator, through ServerPlacer) hands them over instead, so a tick
// costs O(GPUs) rather than O(running jobs).
struct GpuLoad : GpuJobSums {  // the sums (sched/stage.h), and:
  Seconds gate_opens_at = -std::numeric_limits<Seconds>::infinity();  // latest observation gate of its jobs
};

struct Snapshot {
  Seconds now = 0;
  // The one job to place, by pointer (no copy per ask). The queues, their order,
  // head-of-line and failures are the lifecycle's (src/lifecycle): a tick places this job
  // or says why not. None: an empty answer.
  const QueuedJob* job = nullptr;
  std::span<const GpuView> gpus;             // gpus[i].index == i
  std::span<const RunningJob> running;
  // When not empty (one per GPU), the sums of `running` per GPU: the engine uses them
  // instead of walking `running` (which must still describe the same jobs).
  std::span<const GpuLoad> loads;
  // When set, the stages read window statistics from it instead of GpuView::window.
  WindowStatsSource* window_stats = nullptr;
  EngineState state;                         // returned by the previous tick
  bool explain = true;                       // fill Blocked::reason (costs string formatting)
};

}  // namespace aegis
