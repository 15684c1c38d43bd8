// The engine's whole input: the world at one instant, owned by the driver.
#pragma once
#include <deque>
#include <span>

#include "core/decision.h"
#include "core/gpu.h"
#include "core/job.h"
#include "core/running.h"
#include "telemetry/risk.h"

namespace aegis {

using JobQueue = std::deque<QueuedJob>;

// The statistics of a GPU's telemetry window (one metric: 0 SM activity, 1 SM occupancy,
// 2 DRAM activity, 3 utilisation), for a driver that synthesises windows: it builds a
// window only when a stage reads it and remembers its statistics until it changes. The
// answer must equal window_stats() of GpuView::window as it would be built now.
class WindowStatsSource {
 public:
  virtual ~WindowStatsSource() = default;
  virtual const WindowStats& stats(int gpu_index, int metric) = 0;
};

struct Snapshot {
  Seconds now = 0;
  const JobQueue* main_queue = nullptr;      // FIFO of new jobs
  const JobQueue* recovery_queue = nullptr;  // FIFO of jobs retrying after an OOM; served first
  // One job to place instead of the queues: drivers that ask job by job (the lifecycle's
  // placers) hand it by pointer, without copying it into a queue.
  const QueuedJob* only_job = nullptr;
  std::span<const GpuView> gpus;             // gpus[i].index == i
  std::span<const RunningJob> running;
  std::span<const Failure> failures;         // jobs that failed since the last tick
  // When set, the stages read window statistics from it instead of GpuView::window.
  WindowStatsSource* window_stats = nullptr;
  EngineState state;                         // returned by the previous tick
  bool explain = true;                       // fill Blocked::reason (costs string formatting)
};

}  // namespace aegis
