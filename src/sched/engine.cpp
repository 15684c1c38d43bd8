#include "sched/engine.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <new>
#include <stdexcept>

#include "sched/config_params.h"
#include "sched/recovery/recovery.h"
#include "sched/stage_registry.h"

namespace aegis {

namespace {

constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();

// What the engine reads itself, besides its stages: a job's GPU count, memory need,
// whether it has an estimate (which formula gives the need) and whether it must run
// alone; a GPU's memory, jobs and processes (idle) and gate. Its own refusals (too few
// idle, open GPUs large enough) stand for more load, less memory and more activity.
constexpr StageReads kEngineReads{
    {JobField::GpuCount, JobField::EstimatePresent, JobField::MemoryNeed, JobField::ExclusiveOnly},
    {GpuFact::Memory, GpuFact::Jobs, GpuFact::Observation}};

// When the observation gate of a GPU opens again for a job launched on it.
Seconds gate_opens_at(const EngineConfig& c, Seconds launched_at, std::optional<Seconds> first_activity) {
  if (first_activity) return *first_activity + c.observation_window_s;
  return c.observation_max_wait_s > 0 ? launched_at + c.observation_max_wait_s : kNever;
}

// What a running job adds to a GPU's sums: the one definition, for a tick's candidates
// (GpuCandidate) and for loads a driver keeps (GpuLoad), which share these sums.
void add_sums(GpuJobSums& c, const JobSpec& spec, bool exclusive, MiB admitted) {
  c.job_count += 1;
  c.booked_mib += admitted;
  c.has_exclusive = c.has_exclusive || exclusive;
  c.util_sum += spec.hints.util_or_most();
  c.predicted_idle *= 1.0 - spec.predicted_util.value_or(1.0);
  c.score_sum += spec.hints.score_or_most();
  c.min_gpu_count = c.job_count == 1 ? spec.num_gpus : std::min(c.min_gpu_count, spec.num_gpus);
  c.max_gpu_count = std::max(c.max_gpu_count, spec.num_gpus);
  if (c.job_count == 1) c.owner = spec.owner;
  else c.owners_differ = c.owners_differ || spec.owner != c.owner;
}

struct Tick {
  const EngineConfig& cfg;
  const Snapshot& snap;
  std::vector<GpuCandidate>& gpus;

  void add_job(const JobSpec& spec, std::span<const int> on, bool exclusive, MiB admitted,
               Seconds launched_at, std::optional<Seconds> first_activity) {
    for (int g : on) {
      if (g < 0 || g >= static_cast<int>(gpus.size())) continue;
      auto& c = gpus[g];
      add_sums(c, spec, exclusive, admitted);
      const Seconds opens = gate_opens_at(cfg, launched_at, first_activity);
      if (Engine::gate_shut(cfg, snap.now, opens)) {
        c.observing = true;
        c.opens_at = std::max(c.opens_at, opens);
      }
    }
  }
};

}  // namespace

Engine::Engine(EngineConfig config) : config_(std::move(config)) {
  validate(config_);
  estimate_source_ = *parse_estimate_source(config_.estimator);
  accounting_ = parse_memory_accounting(config_.memory_accounting);
  // The filters the config names, in the registry's order (stage_registry.cpp).
  // The roles come from the entries' declarations (stage_registry.h), not from names.
  unsigned roles_seen = 0;  // bit r: a composed filter has role r
  for (const FilterEntry& e : filters_for(config_)) {
    filters_.push_back(e.make(config_));
    const Filter* f = filters_.back().get();
    all_filters_.push_back(f);
    if (e.binds_alone) alone_rules_.push_back(f);
    const unsigned role_bit = 1u << static_cast<unsigned>(e.role);
    if (e.role != StageRole::None && (roles_seen & role_bit))
      throw std::logic_error(fmt::format("stage registry: {} declares a role another composed filter has", e.name));
    roles_seen |= role_bit;
    switch (e.role) {
      case StageRole::None: break;
      case StageRole::Pressure: pressure_ = f; break;
      case StageRole::Gate: gate_ = f; break;
      // A GPU that fails memory must meet neither the gate nor the pressure filter, whose
      // refusals tell the driver when to ask again (room_refuses skips the tick).
      case StageRole::Memory:
        if (!gate_ && !pressure_) memory_ = f;
        break;
      case StageRole::ExclusiveGuard: exclusive_guard_ = true; break;
    }
  }
  order_ = make_order(config_.order, config_);
  lazy_pressure_ = pressure_ && filters_.back().get() == pressure_ && order_->ranks_each_gpu_alone();
  for (const auto& f : filters_)
    if (f.get() != memory_) {
      past_memory_.push_back(f.get());
      // The gate and the pressure filter stay whatever they declare: their refusals are
      // told apart (and the lazy path takes the pressure filter to be last).
      if (f->least_gpus_refused() <= 1 || f.get() == gate_ || f.get() == pressure_) past_memory_one_.push_back(f.get());
    }
  recovery_ = make_recovery(config_);
  // What the caches of drivers may rely on derives from the stages' declarations.
  reads_ = kEngineReads;
  for (const auto& f : filters_) {
    reads_ |= f->reads();
    refusals_monotone_ = refusals_monotone_ && f->monotone();
  }
  reads_ |= order_->reads();
  refusals_monotone_ = refusals_monotone_ && order_->monotone();
  uses_telemetry_ = config_.collocate && reads_.has(GpuFact::Telemetry);
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

void Engine::add_load(GpuLoad& load, const RunningJob& r) const {
  add_sums(load, r.spec, r.exclusive, r.admitted_mib);
  load.gate_opens_at = std::max(load.gate_opens_at, gate_opens_at(r));
}

Seconds Engine::gate_opens_at(const RunningJob& r) const {
  return aegis::gate_opens_at(config_, r.launched_at, r.first_activity);
}

std::optional<Seconds> Engine::gate_opens_after_activity(Seconds first_activity) const {
  // Without collocation a GPU with a job takes no other, gate or not.
  if (!config_.observation || !config_.collocate) return std::nullopt;
  return aegis::gate_opens_at(config_, first_activity, first_activity);
}

std::string Engine::describe() const {
  std::string s = config_.exclusive_first ? "exclusive-first" : "";
  if (config_.collocate) {
    for (const auto& f : filters_) s += (s.empty() ? "" : " > ") + std::string(f->name());
    s += " | " + std::string(order_->name());
  } else {
    s += " (no collocation)";
  }
  s += " | " + std::string(recovery_->name());
  s += " | estimate: " + std::string(to_string(estimate_source_));
  return s;
}

void Engine::fill_requirement(const QueuedJob& job, PlacementRequest& req) const {
  req.job = &job;
  req.estimate = select_estimate(job.spec.estimates, estimate_source_);
  const MiB floor = job.recovery.floor_mib;
  if (req.estimate) {
    req.required_free_mib = std::max(*req.estimate + config_.memory_margin_mib, floor);
    req.admitted_mib = std::max(*req.estimate, floor);
  } else {
    req.required_free_mib = floor > 0 ? floor : config_.estimator_free_floor_mib;
    req.admitted_mib = req.required_free_mib;
  }
}

Engine::RequestShape Engine::request_shape(const QueuedJob& job) const {
  PlacementRequest req;
  fill_requirement(job, req);
  // A digest of the job fields the engine and its stages read (reads_), in a fixed order;
  // the memory need is the shape's two figures instead. Each field is mixed in whole (a
  // multiply and a shift; byte by byte, as FNV-1a, it cost three times as much): for a
  // fixed field each step is a bijection of the digest so far, and for a fixed digest a
  // bijection of the field, so two requests differing in one field never share a digest,
  // and ones differing in several do with odds of about 2^-64.
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 32;
  };
  auto mix_double = [&mix](double d) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    mix(bits);
  };
  if (reads_.has(JobField::GpuCount)) mix(static_cast<std::uint64_t>(job.spec.num_gpus));
  if (reads_.has(JobField::EstimatePresent)) mix(req.estimate ? 1 : 0);
  if (reads_.has(JobField::ExclusiveOnly)) mix(job.recovery.exclusive_only ? 1 : 0);
  RequestShape shape;
  // A hint every reader takes as a need is a figure (covers compares it); the missing
  // value is the one its readers assume, the most.
  if (reads_.is_need(JobField::GpuUtilHint)) shape.need_util = job.spec.hints.util_or_most();
  else if (reads_.has(JobField::GpuUtilHint)) mix_double(job.spec.hints.gpu_util.value_or(-1.0));
  if (reads_.is_need(JobField::SharingScoreHint)) shape.need_score = job.spec.hints.score_or_most();
  else if (reads_.has(JobField::SharingScoreHint))
    mix(static_cast<std::uint64_t>(job.spec.hints.sharing_score.value_or(-1) + 2));
  if (reads_.has(JobField::SubmitTime)) mix_double(job.spec.submit_time);
  if (reads_.has(JobField::Owner)) mix(static_cast<std::uint64_t>(job.spec.owner));
  shape.kind = h;
  shape.need_shared = req.required_free_mib;
  shape.need_alone = std::max(req.estimate.value_or(0), job.recovery.floor_mib);
  return shape;
}

bool Engine::room(std::span<const GpuView> gpus, std::span<const GpuLoad> loads, Room& room) const {
  // Without collocation only idle GPUs count, which drivers know without a summary.
  if (!tells_refusals_from_room() || loads.size() != gpus.size()) return false;
  room.gpus.resize(gpus.size());
  MiB guard_of = -1, guard = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i) room.gpus[i] = room_gpu(gpus[i], loads[i], guard_of, guard);
  room_totals(room);
  return true;
}

bool Engine::room_update(std::span<const GpuView> gpus, std::span<const GpuLoad> loads, std::uint64_t changed,
                         Room& room) const {
  if (room.gpus.size() != gpus.size() || gpus.size() > 64) return this->room(gpus, loads, room);
  if (!tells_refusals_from_room() || loads.size() != gpus.size()) return false;
  MiB guard_of = -1, guard = 0;
  for (std::uint64_t left = changed; left != 0; left &= left - 1) {
    const auto i = static_cast<std::size_t>(std::countr_zero(left));
    if (i < gpus.size()) room.gpus[i] = room_gpu(gpus[i], loads[i], guard_of, guard);
  }
  room_totals(room);
  return true;
}

// The figures effective_free() and idle() read, as a tick's candidate holds them,
// read from the view and the load without making one (a candidate is ~100 bytes to set
// up; a room is updated after every launch and end).
inline Engine::Room::Gpu Engine::room_gpu(const GpuView& view, const GpuLoad& load, MiB& guard_of, MiB& guard) const {
  if (view.total_mib != guard_of) {  // GPUs of a server are mostly alike
    guard_of = view.total_mib;
    guard = config_.memory_guard(guard_of);
  }
  return {effective_free(view, guard, load.booked_mib, accounting_), load.job_count == 0 && view.process_count == 0,
          load.has_exclusive, load.gate_opens_at};
}

void Engine::room_totals(Room& room) const {
  // In locals: stores to `room` could alias its GPUs, so each would be read back.
  MiB most_free = std::numeric_limits<MiB>::min(), most_idle_free = most_free;
  int idle = 0;
  const bool guard = exclusive_guard_;
  for (const Room::Gpu& g : room.gpus) {
    if (!g.exclusive || !guard) most_free = std::max(most_free, g.free);
    if (g.idle) {
      ++idle;
      most_idle_free = std::max(most_idle_free, g.free);
    }
  }
  room.most_free = most_free;
  room.most_idle_free = most_idle_free;
  room.idle = idle;
}

MiB Engine::need_alone(const QueuedJob& job) const {
  const auto estimate = select_estimate(job.spec.estimates, estimate_source_);
  return std::max(estimate.value_or(0), job.recovery.floor_mib);
}

MiB Engine::usable_alone(MiB total_mib, MiB held_mib) const {
  return total_mib - config_.memory_guard(total_mib) - std::max<MiB>(0, held_mib);
}

bool Engine::could_ever_run(const QueuedJob& job, std::span<const MiB> usable) const {
  const int n = job.spec.num_gpus;
  if (n < 1 || n > static_cast<int>(usable.size())) return false;
  // The n-th largest must hold what the job needs alone: then n GPUs can.
  return usable[static_cast<std::size_t>(n - 1)] >= need_alone(job);
}

std::variant<Requeue, Stop> Engine::recover(const Failure& f, bool explain) const {
  if (f.kind != FailureKind::Oom) return Stop{f.job.spec.id, f.detail.empty() ? "failed (not out of memory)" : f.detail};
  return recovery_->after_oom(f.job, explain);
}

std::vector<Engine::GpuReport> Engine::report(const Snapshot& snap) const {
  std::vector<GpuCandidate> gpus(snap.gpus.size());
  Tick t{config_, snap, gpus};
  for (std::size_t i = 0; i < snap.gpus.size(); ++i) {
    gpus[i].view = &snap.gpus[i];
    gpus[i].guard_mib = config_.memory_guard(snap.gpus[i].total_mib);
  }
  for (const auto& r : snap.running)
    t.add_job(r.spec, r.gpus, r.exclusive, r.admitted_mib, r.launched_at, r.first_activity);
  std::vector<GpuReport> out;
  for (auto& g : gpus) {
    g.free_mib = effective_free(g, accounting_);
    using M = GpuCandidate::Metric;
    const auto& w = config_.risk_weights;
    GpuReport r{g.view->index, g.job_count, g.observing, std::nullopt, g.free_mib,
                g.risk(M::SmAct, w), g.risk(M::SmOcc, w), g.risk(M::Drama, w), g.risk(M::Util, w)};
    if (g.observing && g.opens_at < kNever) r.opens_at = g.opens_at;
    out.push_back(r);
  }
  return out;
}

Decisions Engine::tick(const Snapshot& snap) const {
  Decisions d;
  tick(snap, d);
  return d;
}

void Engine::tick(const Snapshot& snap, Decisions& d) const {
  d.reset(snap.state);
  if (!snap.job) return;
  const QueuedJob& job = *snap.job;
  const EngineConfig& cfg = config_;

  // --- The GPUs as the stages see them.
  // Per-thread scratch storage: the engine keeps no state between ticks, but drivers that
  // tick millions of times (the simulator) should not pay an allocation per GPU list.
  thread_local std::vector<GpuCandidate> gpu_scratch;
  Tick t{cfg, snap, gpu_scratch};
  t.gpus.resize(snap.gpus.size());  // each entry is made afresh below
  const bool loads = !snap.loads.empty() && snap.loads.size() == t.gpus.size();
  MiB guard_of = -1, guard = 0;  // GPUs of a server are mostly alike: one guard per size
  // The least any GPU here offers alone after the guard: a job needing no more can ever run
  // on as many GPUs as there are (the common case, asked for every job: no count then).
  MiB least_usable = std::numeric_limits<MiB>::max();
  for (std::size_t i = 0; i < snap.gpus.size(); ++i) {  // one pass per GPU when the loads are kept
    const GpuView& view = snap.gpus[i];
    if (view.total_mib != guard_of) {
      guard_of = view.total_mib;
      guard = cfg.memory_guard(guard_of);
      least_usable = std::min(least_usable, guard_of - guard);
    }
    // Made afresh in place, with the fields below in the same pass: a list cleared and
    // grown again was zeroed in a loop of its own first (1.4 % of an aegis run). With the
    // loads kept, every field is written once: the sums, the effective free memory (the
    // figures effective_free(candidate) reads), and the observation gate while it is
    // shut (the latest gate of its jobs: the one that opens last).
    if (loads) {
      const GpuLoad& l = snap.loads[i];
      const bool shut = Engine::gate_shut(cfg, snap.now, l.gate_opens_at);
      new (&t.gpus[i]) GpuCandidate(l, &view, snap.window_stats, guard, effective_free(view, guard, l.booked_mib, accounting_),
                                    shut, shut ? std::max<Seconds>(0, l.gate_opens_at) : 0);
    } else {
      GpuCandidate& c = *new (&t.gpus[i]) GpuCandidate;
      c.view = &view;
      c.stats_source = snap.window_stats;
      c.guard_mib = guard;
    }
  }
  if (!loads) {
    for (const auto& r : snap.running)
      t.add_job(r.spec, r.gpus, r.exclusive, r.admitted_mib, r.launched_at, r.first_activity);
    for (auto& g : t.gpus) g.free_mib = effective_free(g, accounting_);
  }

  thread_local std::vector<const GpuCandidate*> pick;
  GpuIndices pressure_gpus;
  std::string why;
  bool by_pressure = false;
  Seconds gate_wake = kNever;  // earliest opening of a gate that was the first to refuse a GPU
  const int n = job.spec.num_gpus;
  if (n <= static_cast<int>(t.gpus.size())) {
    // could_ever_run on this server's GPUs, counted without sorting: at least n of them
    // must hold what the job needs alone after the guard.
    const MiB need = need_alone(job);
    int hold = static_cast<int>(t.gpus.size());
    if (need > least_usable) {
      hold = 0;
      for (const auto& g : t.gpus) hold += g.view->total_mib - g.guard_mib >= need ? 1 : 0;
    }
    if (n < 1 || hold < n) {
      // It needs more memory alone than any GPU here has: waiting would block the queue forever.
      d.stops.push_back({job.spec.id, fmt::format("needs {} MiB on a GPU alone; no GPU here has that much", need)});
      return;
    }
  }
  PlacementRequest req;
  fill_requirement(job, req);
  req.now = snap.now;

  pick.clear();
  bool exclusive = false;
  bool alone = false;
  if (n < 1 || n > static_cast<int>(t.gpus.size())) {
    // Without `explain`, a short word assigned in place (no string built and moved).
    if (snap.explain) why = fmt::format("needs {} GPUs; this server has {}", n, t.gpus.size());
    else why = "too large";
  } else {
    // Exclusive first: enough idle, open GPUs give the job GPUs to itself.
    if (cfg.exclusive_first || job.recovery.exclusive_only || !cfg.collocate) {
      // Alone, a job needs no margin, but a GPU that cannot hold its estimate or its
      // recovery floor at all is no use to it (mixed GPU sizes).
      const MiB alone_need = std::max(req.estimate.value_or(0), job.recovery.floor_mib);
      auto alone_rules_admit = [&](const GpuCandidate& g) {
        for (const Filter* f : alone_rules_)
          if (!f->admits(req, g, nullptr)) return false;
        return true;
      };
      for (const auto& g : t.gpus)
        if (g.idle() && !g.observing && g.free_mib >= alone_need && alone_rules_admit(g)) pick.push_back(&g);
      if (static_cast<int>(pick.size()) >= n) {
        order_->sort(pick, req, d.state);
        exclusive = job.recovery.exclusive_only || !cfg.collocate;
        alone = true;
      } else {
        pick.clear();
        if (job.recovery.exclusive_only || !cfg.collocate) {
          if (snap.explain) why = fmt::format("waiting for {} idle GPU{}", n, n > 1 ? "s" : "");
          else why = "idle";
        }
      }
    }
    // Otherwise collocate: every filter must admit a GPU.
    if (pick.empty() && why.empty()) {
      // With a pressure filter last and an order that ranks each GPU alone, the GPUs
      // that pass the other filters are ranked first and the pressure filter (telemetry,
      // the costly one) asked in that order until n pass: the same n as filtering all and
      // ranking those that pass. The bookkeeping of a refusal is the same (every GPU asked).
      const bool lazy = lazy_pressure_ && !snap.explain;
      // A GPU short of memory is turned down before any stage is asked (a quarter of the
      // GPUs an aegis ask shows, each a virtual call per stage before memory): whichever
      // stage refuses it first comes no later than the memory stage, so before the gate
      // and the pressure filter, the only refusals a tick tells apart. The comparison is
      // the memory stage's own (memory_fit.cpp), as room_refuses reads it; with
      // `explain` every GPU is asked, for the stage's own words.
      // The GPUs left then pass memory: the stages are asked without it (past_memory_),
      // and the first to refuse is the one the whole chain would name. For a job of one
      // GPU, without the stages that admit every such job (Filter::least_gpus_refused):
      // they never refuse, so never first.
      const bool short_of_memory_skips = memory_ && !snap.explain;
      const auto& past_memory = n <= 1 ? past_memory_one_ : past_memory_;
      const std::size_t chain_size = short_of_memory_skips ? past_memory.size() : filters_.size();
      const Filter* const* chain = short_of_memory_skips ? past_memory.data() : all_filters_.data();
      const std::size_t asked_first = chain_size - (lazy ? 1 : 0);
      // The refusing stage's own words, asked for only when explaining.
      std::string words;
      std::string* const wants_words = snap.explain ? &words : nullptr;
      for (const auto& g : t.gpus) {
        if (short_of_memory_skips && g.free_mib < req.required_free_mib) continue;
        const Filter* failed = nullptr;
        for (std::size_t k = 0; k < asked_first; ++k)
          if (!chain[k]->admits(req, g, wants_words)) { failed = chain[k]; break; }
        if (!failed) {
          pick.push_back(&g);
        } else {
          // The gate's opening matters only where the gate is what refuses: the stages
          // before it (memory, caps) stand until the driver reports a change.
          if (failed == gate_ && g.opens_at < gate_wake) gate_wake = g.opens_at;
          if (failed == pressure_) {
            by_pressure = true;
            pressure_gpus.push_back(g.view->index);
          }
          if (snap.explain) {
            why += fmt::format("{}gpu{}: {}{}{}", why.empty() ? "" : "; ", g.view->index, failed->name(),
                               words.empty() ? "" : ": ", words);
            words.clear();
          }
        }
      }
      if (lazy) {
        if (static_cast<int>(pick.size()) >= n) order_->sort(pick, req, d.state);
        std::size_t kept = 0;
        for (std::size_t i = 0; i < pick.size() && static_cast<int>(kept) < n; ++i) {
          const GpuCandidate* g = pick[i];
          if (pressure_->admits(req, *g, nullptr)) {
            pick[kept++] = g;
          } else {
            by_pressure = true;
            pressure_gpus.push_back(g->view->index);
          }
        }
        pick.resize(kept);
        if (pressure_gpus.size() > 1)  // mostly one: no call then
          std::sort(pressure_gpus.begin(), pressure_gpus.end());  // in GPU order, as asked in turn
      }
      if (static_cast<int>(pick.size()) >= n) {
        if (!lazy) order_->sort(pick, req, d.state);
      } else {
        if (snap.explain)
          why = fmt::format("needs {} GPU{} with {} MiB free; {}", n, n > 1 ? "s" : "", req.required_free_mib,
                            why.empty() ? "none admitted" : why);
        else why = "filtered";
        pick.clear();
      }
    }
  }

  if (pick.empty()) {
    // Moved, not copied: both were made for this ask.
    d.blocked = Blocked{job.spec.id, std::move(why), by_pressure, std::move(pressure_gpus)};
    // The next time a gate that held the job back opens, for drivers that sleep between events.
    if (gate_wake < kNever) d.wake_at = gate_wake;
    return;
  }

  Launch l;
  l.job = job.spec.id;
  l.exclusive = exclusive;
  l.alone = alone;
  l.admitted_mib = req.admitted_mib;
  l.free_at_placement = std::numeric_limits<MiB>::max();
  for (int k = 0; k < n; ++k) {
    l.gpus.push_back(pick[k]->view->index);
    l.free_at_placement = std::min(l.free_at_placement, pick[k]->free_mib);
  }
  std::sort(l.gpus.begin(), l.gpus.end());
  d.state.rr_cursor = pick[n - 1]->view->index;
  d.launches.push_back(std::move(l));
}

}  // namespace aegis
