// The scheduling engine: a pure function from a Snapshot to Decisions. It reads no
// clock, opens no file and starts no process; the job lifecycle asks it, through the
// drivers' placers, about one job at a time (the queues are the lifecycle's). One tick:
// idle GPUs to the job alone (exclusive first), else the policy's filters and order;
// recover() is the recovery rule for a job that failed.
#pragma once
#include <algorithm>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "estimate/source.h"
#include "sched/config.h"
#include "sched/memory_accounting.h"
#include "sched/snapshot.h"
#include "sched/stage.h"

namespace aegis {

class Engine {
 public:
  // Validates the config (throws ConfigError) and composes the stages it names.
  explicit Engine(EngineConfig config);
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  Decisions tick(const Snapshot& s) const;
  // The same answer written into `out`, whatever it held (Decisions::reset): a driver that
  // asks often and keeps one Decisions (ServerPlacer) reuses its lists' storage instead of
  // allocating a launch list per ask.
  void tick(const Snapshot& s, Decisions& out) const;

  // Adds a running job to the load of one of its GPUs (Snapshot::loads), as a tick sums it.
  void add_load(GpuLoad& load, const RunningJob& r) const;
  // When the observation gate a running job holds on its GPUs opens: what add_load takes
  // the latest of into GpuLoad::gate_opens_at (a first activity changes only this).
  Seconds gate_opens_at(const RunningJob& r) const;

  // What a GPU of `total_mib` can ever offer a job alone: its total less the guard, less
  // `held_mib`, the memory in use there when no job of the scheduler runs on it (the
  // driver's reserve, processes outside it). Placement on an idle GPU offers exactly this
  // (reported free less the guard), so a job needing more can never be placed there.
  MiB usable_alone(MiB total_mib, MiB held_mib = 0) const;
  // False when no `num_gpus` of GPUs offering these (usable_alone, largest first) could ever take `job`: it needs
  // more GPUs than there are, or more memory alone than they hold. Drivers stop such jobs
  // instead of letting them wait forever. O(1): drivers ask it for every job they try.
  bool could_ever_run(const QueuedJob& job, std::span<const MiB> usable_largest_first) const;

  // How each GPU looks to the stages right now, for status displays and metrics.
  struct GpuReport {
    int index = 0;
    int jobs = 0;
    bool observing = false;
    std::optional<Seconds> opens_at;  // when observing and the gate's end is known
    MiB effective_free_mib = 0;       // after the guard, under the policy's accounting
    double risk_smact = 0, risk_smocc = 0, risk_drama = 0, risk_util = 0;
  };
  std::vector<GpuReport> report(const Snapshot& s) const;

  // What becomes of a job that failed (the recovery rule; the lifecycle asks it through
  // its placer). `explain`: as RecoveryRule::after_oom's.
  std::variant<Requeue, Stop> recover(const Failure& f, bool explain = true) const;

  // What `job` asks of a GPU, in the terms of this engine's stages. Drivers that ask many
  // times (the simulator's dispatcher) use it to remember refusals: two requests of the
  // same kind get the same answer from the same snapshot when their memory needs are
  // equal, and, when refusals_monotone(), a request needing at least as much memory (both
  // figures) is refused wherever the smaller one was.
  struct RequestShape {
    std::uint64_t kind = 0;  // digest of the job fields reads() names, except the needs
    MiB need_shared = 0;     // effective free memory required to share a GPU
    MiB need_alone = 0;      // memory an idle GPU must offer to run it alone
    double need_util = 0;    // utilisation hint (missing: 1) when every reader takes it as a need
    int need_score = 0;      // sharing-score hint (missing: 2), likewise
    bool covers(const RequestShape& refused) const {
      return kind == refused.kind && need_shared >= refused.need_shared && need_alone >= refused.need_alone &&
             need_util >= refused.need_util && need_score >= refused.need_score;
    }
    // Equal shapes get equal answers from an unchanged server (each covers the other).
    bool operator==(const RequestShape&) const = default;
  };
  RequestShape request_shape(const QueuedJob& job) const;

  // What a server's GPUs offer any request, as the stages that read no job field but its
  // memory need see them: effective free memory (after the guard, under the policy's
  // accounting), an exclusive job, the observation gate; and what idle GPUs offer alone.
  // A driver keeps one per server so as to tell, without a tick, that a request is
  // refused. It stands while the GPUs only gain load or lose memory; a driver rebuilds it
  // after any other change (a job ending, a first activity, ...), not as time passes.
  struct Room {
    struct Gpu {
      MiB free = 0;            // effective free memory: what sharing it offers
      bool idle = false;       // no job, no process: the alone path's
      bool exclusive = false;  // a job on it runs alone (the exclusive guard refuses)
      Seconds gate_opens_at = 0;  // its observation gate is shut before this time
    };
    std::vector<Gpu> gpus;
    MiB most_free = 0;       // the most any GPU without an exclusive job offers to share
    MiB most_idle_free = 0;  // the most an idle GPU offers alone
    int idle = 0;            // idle GPUs
  };
  // True when room_refuses can tell anything: the engine collocates, and its memory stage
  // comes before the observation gate and the pressure filter.
  bool tells_refusals_from_room() const { return memory_ && config_.collocate; }
  // Fills `room` from the GPUs and their loads (Snapshot::gpus, Snapshot::loads); false
  // when !tells_refusals_from_room() or no loads are given (then only a tick can tell).
  bool room(std::span<const GpuView> gpus, std::span<const GpuLoad> loads, Room& room) const;
  // The same summary for a `room` that room() (or this) filled from these GPUs and loads
  // when only the GPUs whose bit is set in `changed` (bit i: GPU i) changed since: those
  // are summarised again, then the totals, which read only the per-GPU entries. Equal to
  // room(); a room of another size, or of more than 64 GPUs, is filled whole.
  bool room_update(std::span<const GpuView> gpus, std::span<const GpuLoad> loads, std::uint64_t changed,
                   Room& room) const;
  // True when a tick at `now` would refuse a request of this shape for `num_gpus` GPUs on
  // the GPUs `room` describes: fewer than num_gpus pass the exclusive guard, the memory
  // stage and the gate, and fewer than num_gpus idle ones could take it alone. A bound: a
  // tick may refuse more (caps, pressure, ...), never less. `wake_at` gets the earliest
  // opening of a gate that shut a GPU the guard and memory passed (infinity if none): the
  // time to ask again, as a tick's Decisions::wake_at (it may name a gate a tick would not).
  // It reads the figures the memory stage, the exclusive guard and the alone path compare
  // rather than asking the stages (asked per server per request, a virtual call each cost
  // 15 % of a run); Room.RefusesOnlyWhatATickRefuses holds it to the tick.
  bool room_refuses(const Room& room, const RequestShape& shape, int num_gpus, Seconds now, Seconds& wake_at) const {
    wake_at = std::numeric_limits<Seconds>::infinity();
    if (num_gpus < 1) return false;
    // Most requests refused here are refused by memory on every GPU: told from the totals.
    const bool none_alone = room.idle < num_gpus || room.most_idle_free < shape.need_alone;
    if (room.most_free < shape.need_shared && none_alone) return true;
    int shares = 0, alone = 0;
    for (const Room::Gpu& g : room.gpus) {
      if ((g.exclusive && exclusive_guard_) || g.free < shape.need_shared) continue;
      if (gate_shut(config_, now, g.gate_opens_at)) wake_at = std::min(wake_at, std::max<Seconds>(0, g.gate_opens_at));
      else if (++shares >= num_gpus) return false;
    }
    if (none_alone) return true;
    for (const Room::Gpu& g : room.gpus)
      if (g.idle && g.free >= shape.need_alone && ++alone >= num_gpus) return false;
    return true;
  }
  // Whether a GPU's observation gate is shut at `now`, its jobs' latest opening being
  // `opens_at`: the one rule for a tick's candidates and a server's room.
  static bool gate_shut(const EngineConfig& c, Seconds now, Seconds opens_at) { return c.observation && now < opens_at; }
  // RequestShape::need_alone without the digest (cheap; asked for every job tried).
  MiB need_alone(const QueuedJob& job) const;

  const EngineConfig& config() const { return config_; }
  // What the engine and its composed stages read (their declarations, stage.h).
  const StageReads& reads() const { return reads_; }
  // True when every composed stage declares its refusals monotone (stage.h). Only then
  // may a driver remember refusals: a refusal stands for a request that covers it and for
  // more load, less memory and more activity, until time passes or a job first shows activity.
  bool refusals_monotone() const { return refusals_monotone_; }
  // When the observation gates of a running job's GPUs open after its first activity at
  // `first_activity`, or nullopt when the engine has no gate (a first activity then opens
  // nothing). Refusals made before the activity stand until then (the gate only closes
  // at activity), so a driver that remembers refusals need only ask again at that time.
  std::optional<Seconds> gate_opens_after_activity(Seconds first_activity) const;
  // True when the engine collocates and some composed stage reads telemetry windows (the
  // pressure filter, the LUG order): drivers without telemetry changes may skip re-evaluating.
  bool uses_telemetry() const { return uses_telemetry_; }
  // "memory > observing > pressure | magm | ladder", for logs and reports.
  std::string describe() const;

 private:
  // One GPU of a room (guard: the memory guard of a GPU of capacity guard_of, kept
  // between calls) and the room's totals from its GPUs: room() and room_update() share them.
  Room::Gpu room_gpu(const GpuView& view, const GpuLoad& load, MiB& guard_of, MiB& guard) const;
  void room_totals(Room& room) const;

  EngineConfig config_;
  EstimateSource estimate_source_;
  MemoryAccounting accounting_;
  std::vector<std::unique_ptr<Filter>> filters_;
  std::vector<const Filter*> all_filters_;   // filters_, as plain pointers (a tick walks them per GPU)
  std::vector<const Filter*> past_memory_;   // filters_ less memory_: asked of GPUs known to pass memory
  std::vector<const Filter*> past_memory_one_;  // past_memory_ less those that refuse no one-GPU job
  std::vector<const Filter*> alone_rules_;  // in filters_; also checked for GPUs taken alone
  const Filter* pressure_ = nullptr;        // in filters_ when composed: its refusals are told apart (Blocked::by_pressure)
  const Filter* gate_ = nullptr;            // in filters_ when composed: its openings are the wake times
  const Filter* memory_ = nullptr;          // in filters_, before gate_ and pressure_: Room summarises what it reads
  bool exclusive_guard_ = false;            // the exclusive guard is in filters_
  bool lazy_pressure_ = false;              // pressure_ is last and order_ ranks each GPU alone (tick)
  std::unique_ptr<Order> order_;
  std::unique_ptr<RecoveryRule> recovery_;
  StageReads reads_;
  bool refusals_monotone_ = true;
  bool uses_telemetry_ = false;

  // The memory figures of a placement request (one definition for tick and request_shape).
  void fill_requirement(const QueuedJob& job, PlacementRequest& req) const;
};

}  // namespace aegis
