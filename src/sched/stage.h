// The extension points of the engine, after the Kubernetes scheduler framework:
// a Filter admits or rejects one GPU for one job, an Order ranks the GPUs left, and a
// RecoveryRule decides what happens to a job that died of OOM. Policies compose them.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/decision.h"
#include "core/gpu.h"
#include "core/running.h"
#include "sched/config.h"
#include "sched/window_stats_source.h"

namespace aegis {

// Everything the stages may know about one GPU during one tick. Built once per tick by
// the engine and updated as the tick places jobs.

// What the jobs on one GPU add up to: one struct for a tick's candidates (GpuCandidate)
// and for the loads a driver keeps (GpuLoad, snapshot.h), so that a candidate takes a
// kept load in one copy.
struct GpuJobSums {
  int job_count = 0;         // jobs on it, including ones placed this tick
  MiB booked_mib = 0;        // sum of admitted memory of the jobs on it
  bool has_exclusive = false;
  double util_sum = 0;       // profiled utilisation of its jobs (Horus)
  // Product of (1 - predicted utilisation) of its jobs, 1 - their union (a job without a
  // prediction counts as fully busy): the share of time no job of it is expected to run.
  double predicted_idle = 1;
  int score_sum = 0;         // sharing scores of its jobs (Lucid)
  int min_gpu_count = 0;     // GPU counts of its jobs (Lucid: equal counts share)
  int max_gpu_count = 0;
  std::int64_t owner = -1;     // the owner of its first job ...
  bool owners_differ = false;  // ... and whether a job of another owner is on it too
};

struct GpuCandidate : GpuJobSums {
  GpuCandidate() = default;
  // Every field at once, from a load's sums (a tick makes one per GPU per ask: written
  // once each, rather than zeroed and then overwritten).
  GpuCandidate(const GpuJobSums& sums, const GpuView* v, WindowStatsSource* source, MiB guard, MiB free,
               bool shut, Seconds opens)
      : GpuJobSums(sums), view(v), stats_source(source), guard_mib(guard), free_mib(free), observing(shut),
        opens_at(opens) {}

  const GpuView* view = nullptr;
  WindowStatsSource* stats_source = nullptr;  // Snapshot::window_stats
  MiB guard_mib = 0;
  MiB free_mib = 0;          // effective free memory under the policy's accounting
  bool observing = false;    // closed by the observation gate
  Seconds opens_at = 0;      // when observing: time the gate opens (inf = on activity)

  // Free memory after the guard, as reported by the GPU.
  MiB reported_free() const { return view->free_mib - guard_mib; }
  // Capacity after the guard minus memory booked for the jobs on it.
  // Memory of processes that belong to no job is never booked by anyone, so it goes too.
  MiB booked_free() const { return view->total_mib - guard_mib - booked_mib - view->foreign_mib; }
  bool idle() const { return job_count == 0 && view->process_count == 0; }

  // Risk score of one metric of the telemetry window, computed on first use (stages
  // often need only SM activity to decide). Inline, with the driver's source asked
  // directly: the pressure filter reads one to three per GPU it asks.
  enum class Metric { SmAct = 0, SmOcc = 1, Drama = 2, Util = 3 };
  double risk(Metric m, const RiskWeights& w) const {
    double& cached = risk_[static_cast<std::size_t>(m)];
    if (cached < 0)
      cached = stats_source ? risk_score(stats_source->stats(view->index, static_cast<int>(m)), w) : window_risk(m, w);
    return cached;
  }

 private:
  // risk() of GpuView::window itself (no source).
  double window_risk(Metric m, const RiskWeights& w) const;
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

// What a stage reads, declared next to its code (docs/architecture.md, "Stages"). Drivers
// that remember refusals derive what they must compare from it: Engine::request_shape
// digests exactly the job fields the composed stages read, so a field no stage reads
// cannot split the cache and a field one does read cannot be forgotten.
enum class JobField : std::uint32_t {
  GpuCount = 1u << 0,          // spec.num_gpus
  EstimatePresent = 1u << 1,   // whether the policy's estimate source could tell
  MemoryNeed = 1u << 2,        // the estimate's value, required_free_mib, admitted_mib
  ExclusiveOnly = 1u << 3,     // recovery.exclusive_only
  GpuUtilHint = 1u << 4,       // spec.hints.gpu_util
  SharingScoreHint = 1u << 5,  // spec.hints.sharing_score
  SubmitTime = 1u << 6,        // spec.submit_time
  Owner = 1u << 7,             // spec.owner
};
// A new JobField needs its encoding in Engine::request_shape (MemoryNeed has none: it is
// the shape's two memory figures, compared by RequestShape::covers).

enum class GpuFact : std::uint32_t {
  Memory = 1u << 0,       // capacity, reported, booked and effective free memory
  Jobs = 1u << 1,         // the jobs on it (count, exclusive flag, their hints, GPU
                          // counts and owners) and the processes seen on it
  Telemetry = 1u << 2,    // telemetry level and window (risk scores)
  Observation = 1u << 3,  // the observation gate: its jobs' launch and first-activity times, now
  Mig = 1u << 4,          // whether it is a MIG instance
  Predictions = 1u << 5,  // its jobs' predicted utilisation (JobSpec::predicted_util)
};

struct StageReads {
  std::uint32_t job = 0;   // JobField bits
  std::uint32_t gpu = 0;   // GpuFact bits
  std::uint32_t need = 0;  // JobField bits, within `job`, read as a need (below)

  constexpr StageReads() = default;
  constexpr StageReads(std::initializer_list<JobField> jobs, std::initializer_list<GpuFact> gpus,
                       std::initializer_list<JobField> needs = {}) {
    for (JobField f : jobs) job |= static_cast<std::uint32_t>(f);
    for (GpuFact f : gpus) gpu |= static_cast<std::uint32_t>(f);
    for (JobField f : needs) need |= static_cast<std::uint32_t>(f);
    need &= job;
  }
  constexpr bool has(JobField f) const { return (job & static_cast<std::uint32_t>(f)) != 0; }
  constexpr bool has(GpuFact f) const { return (gpu & static_cast<std::uint32_t>(f)) != 0; }
  // A hint read as a need: a job asking more of it (a missing hint counts as the most) is
  // refused wherever one asking less was. Together, a field stays a need only if every
  // stage that reads it says so; drivers then compare it as a figure (RequestShape).
  constexpr bool is_need(JobField f) const { return (need & static_cast<std::uint32_t>(f)) != 0; }
  constexpr StageReads& operator|=(const StageReads& o) {
    need = (need & ~o.job) | (o.need & ~job) | (need & o.need);
    job |= o.job;
    gpu |= o.gpu;
    return *this;
  }
  friend constexpr bool operator==(const StageReads&, const StageReads&) = default;
};

// Every stage declares what it reads and whether its refusals are monotone, next to its
// code, with the reason. A monotone refusal stands
//   - for any job equal in every job field the stage reads except MemoryNeed that needs at
//     least as much memory (both RequestShape figures), and
//   - for the same GPU with more load (more jobs on it), less free memory or more activity
//     (higher telemetry samples, more processes).
// Time passing and a running job's first activity are not covered: they open observation
// gates, and the engine says when (Decisions::wake_at); drivers ask again then.
// Drivers may remember refusals only while every composed stage is monotone
// (Engine::refusals_monotone); a stage that is not turns those caches off.
class Filter {
 public:
  virtual ~Filter() = default;
  virtual std::string_view name() const = 0;
  // Whether it admits GPU `g` for the request. `why` is null on the hot path (a tick that
  // does not explain: the simulator asks millions of times), so the answer costs a bool;
  // when a tick explains (Snapshot::explain) it passes a string, and a refusal writes the
  // stage's own words there ("needs 20480 MiB, 8000 free"), which the engine shows after
  // the stage's name in Blocked::reason. A refusal may leave it empty: the name alone.
  virtual bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const = 0;
  virtual StageReads reads() const = 0;
  virtual bool monotone() const = 0;
  // The fewest GPUs a job it may refuse asks for: it admits every GPU for a job of fewer.
  // The engine then does not ask it about such jobs (a virtual call per GPU it spares).
  virtual int least_gpus_refused() const { return 1; }
};

class Order {
 public:
  virtual ~Order() = default;
  virtual std::string_view name() const = 0;
  // Sorts best first; must be deterministic (ties by GPU index).
  virtual void sort(std::vector<const GpuCandidate*>& gpus, const PlacementRequest& r,
                    const EngineState& state) const = 0;
  virtual StageReads reads() const = 0;
  // An order that only ranks (drops no GPU) takes no part in a refusal: monotone.
  virtual bool monotone() const = 0;
  // True when each GPU's rank follows from the GPU alone (a key of its own, ties by index),
  // so that any subset comes out in the same relative order: the engine may then rank the
  // GPUs before the last filter has seen them all, and stop at the first that pass.
  virtual bool ranks_each_gpu_alone() const { return false; }
};

class RecoveryRule {
 public:
  virtual ~RecoveryRule() = default;
  virtual std::string_view name() const = 0;
  // `explain`: write Requeue::why (a driver that never shows it, the simulator, saves the
  // formatting, about 900 instructions an OOM); a Stop's reason is always written.
  virtual std::variant<Requeue, Stop> after_oom(const RunningJob& job, bool explain) const = 0;
};

}  // namespace aegis
