// The engine's output: what the driver must do now, in order, and when to ask again.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/gpu_indices.h"
#include "core/job.h"
#include "core/units.h"

namespace aegis {

struct Launch {
  JobId job = 0;
  GpuIndices gpus;            // GpuView::index values
  bool exclusive = false;     // no other job may join these GPUs while it runs
  bool alone = false;         // placed on idle GPUs (exclusive first): nobody beside it yet
  MiB admitted_mib = 0;       // memory booked per GPU (estimate, or floor when none)
  MiB free_at_placement = 0;  // smallest effective free memory among its GPUs
};

// A failed job goes back to the recovery queue with a new recovery state (Engine::recover).
struct Requeue {
  JobId job = 0;
  RecoveryState recovery;
  std::string why;
};

// A job leaves for good (failure that is not an OOM, or the ladder is exhausted).
struct Stop {
  JobId job = 0;
  std::string reason;
};

// Why a job (the head of the queue) could not be placed, for users and for drivers.
struct Blocked {
  JobId job = 0;
  std::string reason;           // one line: each GPU's refusing stage in its own words, e.g.
                                // "needs 1 GPU with 22528 MiB free; gpu0: memory: needs 22528 MiB,
                                // 8000 free; gpu1: observing: a new job is observed; open in 40 s"
  bool by_pressure = false;     // some GPU passed every stage but the pressure filter
  GpuIndices pressure_gpus;  // those GPUs: only their telemetry can change the answer
};

struct EngineState {
  int rr_cursor = -1;  // last GPU index chosen by the round-robin order
};

struct Decisions {
  std::vector<Stop> stops;        // the job can never run on these GPUs
  std::vector<Launch> launches;   // the job's, when it can start now (one at most)
  std::optional<Blocked> blocked;
  std::optional<Seconds> wake_at; // earliest time a gate that held a waiting job back opens
  EngineState state;

  // As a fresh one with this state, keeping the lists' storage (Engine::tick into an
  // existing Decisions). A new field must be reset here too.
  void reset(const EngineState& s) {
    stops.clear();
    launches.clear();
    blocked.reset();
    wake_at.reset();
    state = s;
  }
};

}  // namespace aegis
