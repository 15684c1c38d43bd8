// The extension points of the engine, after the Kubernetes scheduler framework:
// a Filter admits or rejects one GPU for one job, an Order ranks the GPUs left, and a
// RecoveryRule decides what happens to a job that died of OOM. Policies compose them.
#pragma once
#include <array>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "core/decision.h"
#include "core/gpu.h"
#include "core/running.h"
#include "sched/config.h"

namespace aegis {

// Everything the stages may know about one GPU during one tick. Built once per tick by
// the engine and updated as the tick places jobs.
struct GpuCandidate {
  const GpuView* view = nullptr;
  MiB guard_mib = 0;
  MiB free_mib = 0;          // effective free memory under the policy's accounting
  MiB booked_mib = 0;        // sum of admitted memory of the jobs on it
  int job_count = 0;         // jobs on it, including ones placed this tick
  bool has_exclusive = false;
  bool observing = false;    // closed by the observation gate
  Seconds opens_at = 0;      // when observing: time the gate opens (inf = on activity)
  double util_sum = 0;       // profiled utilisation of its jobs (Horus)
  int score_sum = 0;         // sharing scores of its jobs (Lucid)
  int min_gpu_count = 0;     // GPU counts of its jobs (Lucid: equal counts share)
  int max_gpu_count = 0;

  // Free memory after the guard, as reported by the GPU.
  MiB reported_free() const { return view->free_mib - guard_mib; }
  // Capacity after the guard minus memory booked for the jobs on it.
  MiB booked_free() const { return view->total_mib - guard_mib - booked_mib; }
  bool idle() const { return job_count == 0 && view->process_count == 0; }

  // Risk score of one metric of the telemetry window, computed on first use (stages
  // often need only SM activity to decide).
  enum class Metric { SmAct = 0, SmOcc = 1, Drama = 2, Util = 3 };
  double risk(Metric m, const RiskWeights& w) const;

 private:
  mutable std::array<double, 4> risk_{-1, -1, -1, -1};  // -1 = not computed yet
};

// The job being placed and what the memory filter asks of a GPU for it.
struct PlacementRequest {
  const QueuedJob* job = nullptr;
  std::optional<MiB> estimate;  // from the policy's estimate source
  MiB required_free_mib = 0;    // effective free memory a GPU must offer
  MiB admitted_mib = 0;         // what a placement books per GPU
  Seconds now = 0;
};

class Filter {
 public:
  virtual ~Filter() = default;
  virtual std::string_view name() const = 0;
  virtual bool admits(const PlacementRequest& r, const GpuCandidate& g) const = 0;
};

class Order {
 public:
  virtual ~Order() = default;
  virtual std::string_view name() const = 0;
  // Sorts best first; must be deterministic (ties by GPU index).
  virtual void sort(std::vector<const GpuCandidate*>& gpus, const PlacementRequest& r,
                    const EngineState& state) const = 0;
};

class RecoveryRule {
 public:
  virtual ~RecoveryRule() = default;
  virtual std::string_view name() const = 0;
  virtual std::variant<Requeue, Stop> after_oom(const RunningJob& job) const = 0;
};

}  // namespace aegis
