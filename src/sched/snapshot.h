// The engine's whole input: the world at one instant, owned by the driver.
#pragma once
#include <deque>
#include <span>

#include "core/decision.h"
#include "core/gpu.h"
#include "core/job.h"
#include "core/running.h"

namespace aegis {

using JobQueue = std::deque<QueuedJob>;

struct Snapshot {
  Seconds now = 0;
  const JobQueue* main_queue = nullptr;      // FIFO of new jobs
  const JobQueue* recovery_queue = nullptr;  // FIFO of jobs retrying after an OOM; served first
  std::span<const GpuView> gpus;             // gpus[i].index == i
  std::span<const RunningJob> running;
  std::span<const Failure> failures;         // jobs that failed since the last tick
  EngineState state;                         // returned by the previous tick
  bool explain = true;                       // fill Blocked::reason (costs string formatting)
};

}  // namespace aegis
