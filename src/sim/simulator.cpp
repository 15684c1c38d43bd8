#include "sim/simulator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fmt/format.h>
#include <limits>
#include <memory>
#include <span>
#include <unordered_map>

#include "core/busy_union.h"
#include "core/mig_models.h"
#include "lifecycle/lifecycle.h"
#include "sched/engine.h"
#include "sim/csv.h"
#include "sim/models/interference.h"
#include "sim/models/random.h"
#include "sim/models/startup.h"
#include "sim/sim_estimates.h"  // [estimate-chain hook]

namespace aegis {

namespace {

constexpr std::uint64_t kNoJob = std::numeric_limits<std::uint64_t>::max();

enum class EvKind : std::uint8_t { Arrival, FirstActivity, RampDone, Complete, Wake };

// 24 bytes (the heap moves them at every push and pop): the kind rides in the low byte of
// the push order, which it does not reorder (each push has its own sequence number, so
// seq << 8 | kind orders as seq does); versions are a job's 32-bit attempt or version.
struct Event {
  Event(Seconds at, std::uint64_t seq, EvKind k, int who, std::uint32_t v)
      : t(at), order(seq << 8 | static_cast<std::uint8_t>(k)), id(who), version(v) {}
  Seconds t = 0;
  std::uint64_t order = 0;    // push order << 8 | kind
  int id = -1;                // job, or server for Wake
  std::uint32_t version = 0;
  EvKind kind() const { return static_cast<EvKind>(order & 0xff); }
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
};
static_assert(sizeof(Event) == 24);

enum class Phase { Pending, Queued, Running, Failed, Done, Stopped };

// The part of a running attempt that lives on one server (a gang job has several).
struct Part {
  int server = 0;
  int running_pos = -1;  // index in Server::running
};

// What a job needs from its arrival to its end (freed then: a million-job trace keeps
// only the jobs in flight).
struct Live {
  Engine::RequestShape request;    // what its current queued request asks of a server
  // The recovery state `request` was computed for (the only part of a job that changes).
  MiB request_floor = -1;
  MiB feasible_floor = -1;  // recovery floor at which the cluster was found able to run it
  bool request_exclusive = false;
  Seconds work = 0;                // solo-seconds of work: its own duration or the workload's
  // The current attempt.
  Seconds last_update = 0;
  double work_done = 0;
  double speed = 1;
  std::uint64_t speed_stamp = 0;   // the refresh() that last worked out its speed
  Seconds ends_at = 0;             // time of its pending completion event
  bool active = false;             // has shown GPU activity
  MiB held_mib = 0;                // per GPU
  std::optional<MiB> mps_limit;    // its MPS client memory limit, as the lifecycle set it
  // Inline up to 8 GPUs on 2 servers (all but 0.3 % of Philly's jobs): a launch and an
  // end allocate nothing.
  SmallList<int, 8> gpus;          // cluster-wide ids
  SmallList<Part, 2> parts;
};

// 32 bytes, a million of them at --repeat 13: its trace job is the one at its own id in
// the trace (Run::trace_jobs_), its record a number, not pointers of their own, and its
// work is kept while it lives (Live::work).
struct Job {
  const WorkloadProfile* w = nullptr;
  // (Its spec and recovery state live in the lifecycle, from its arrival on.)
  std::unique_ptr<Live> live;      // from its arrival to its end
  Phase phase = Phase::Pending;
  std::uint32_t attempt = 0;       // launches so far; identifies activity events
  std::uint32_t version = 0;       // identifies the valid completion event
  std::uint32_t slot = 0;          // its result: Run::records_[slot], in trace-index order
};

struct Gpu {
  int server = 0;
  int local = 0;
  MiB total = 0;
  MiB used = 0;
  std::vector<int> running;  // jobs launched here
  std::vector<int> active;   // jobs that have shown activity here
  double active_util = 0;    // sums of the active jobs' solo utilisation, DRAM and SM activity
  double active_drama = 0;
  double active_smact = 0;
  double sm_fraction = 1.0;  // a MIG instance's share of the GPU's SMs
  int last_launched = -1;    // the job placed on it last (for the blast radius)
  std::uint64_t touched = 0; // refresh() stamp
  GpuSample sample{};        // current whole-GPU activity
  std::vector<std::pair<Seconds, GpuSample>> history;  // change points, oldest first
  std::uint64_t history_version = 0;                    // bumps when history changes
  // The telemetry window the engine last asked for, as runs of equal samples (a step
  // function is a few runs; with telemetry noise every sample is its own run).
  std::vector<std::pair<GpuSample, std::uint32_t>> window;
  std::int64_t window_n = 0;                            // samples in `window`
  std::int64_t window_k = -1;                           // newest sample index in `window`
  std::uint64_t window_history = kNoJob;                // history_version it was built from
  std::array<WindowStats, 4> stats{};                   // of `window`, per metric, once asked
  unsigned stats_known = 0;                             // bit m: stats[m] is of `window`
  Seconds last_t = 0;
  double energy_j = 0, mem_integral = 0, sm_integral = 0;
};

// One server: its GPUs, the jobs running on it, and the dispatcher's memo of the requests
// its engine refused (valid while nothing on the server changed).
struct Server {
  explicit Server(const Engine& engine) : placer(engine) {}
  int first_gpu = 0;
  int ngpus = 0;
  // The server's GPUs as its engine sees them (views, running jobs with local GPU
  // indices, engine state), asked one job at a time (lifecycle/placer.h).
  ServerPlacer placer;
  int idle_gpus = 0;                // GPUs with no job
  MiB free_mib = 0;                 // sum of its GPUs' free memory (the dispatcher's order)
  std::uint64_t candidate_stamp = 0;  // the dispatcher pass that last listed it
  std::vector<Seconds> wakes;         // times of its pending Wake events
  std::uint64_t version = 0;
  std::vector<Engine::RequestShape> refused;  // requests refused at refused_version
  std::uint64_t refused_version = kNoJob;
  // What its GPUs offer any request (Engine::Room): tells most refusals for memory, an
  // exclusive job or a shut gate without an ask. A function of the views and loads only,
  // so rebuilt when asked after a change of its GPUs' memory, loads, processes or gates
  // (room_stale, set wherever those change), not after every version bump: a wake or
  // falling activity changes nothing it holds. Only the GPUs that changed are summarised
  // again (Engine::room_update): a launch or an end changes one or two of eight.
  Engine::Room room;
  bool room_stale = true;
  bool has_room = false;
  std::uint64_t room_changed = 0;  // bit i: GPU i changed since the room was filled

  // GPU `local` changed what the room holds of it (memory, processes, loads or gate).
  void stale_room(int local) {
    room_stale = true;
    room_changed |= local < 64 ? std::uint64_t{1} << local : ~std::uint64_t{0};
  }
};

// Positions of `jobs` in the order of their index, equal ones in the order they come (a
// stable sort). Indices are usually distinct and dense (rows of a file, and the copies of
// --repeat after them): then each goes straight to its slot, in linear time.
std::vector<std::uint32_t> trace_index_order(const std::vector<TraceJob>& jobs) {
  const std::size_t n = jobs.size();
  std::vector<std::uint32_t> order;
  if (n == 0) return order;
  std::int64_t lo = jobs.front().index, hi = lo;
  for (const auto& j : jobs) {
    lo = std::min(lo, j.index);
    hi = std::max(hi, j.index);
  }
  constexpr auto kEmpty = std::numeric_limits<std::uint32_t>::max();
  const auto range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
  if (range != 0 && range <= 2 * static_cast<std::uint64_t>(n)) {
    std::vector<std::uint32_t> slot(range, kEmpty);
    bool distinct = true;
    for (std::uint32_t i = 0; i < n && distinct; ++i) {
      auto& s = slot[static_cast<std::uint64_t>(jobs[i].index - lo)];
      distinct = s == kEmpty;
      s = i;
    }
    if (distinct) {
      order.reserve(n);
      for (std::uint32_t s : slot)
        if (s != kEmpty) order.push_back(s);
      return order;
    }
  }
  // Sparse or repeated indices: sort (index, position) pairs, which is the stable order.
  std::vector<std::pair<std::int64_t, std::uint32_t>> keyed(n);
  for (std::uint32_t i = 0; i < n; ++i) keyed[i] = {jobs[i].index, i};
  std::sort(keyed.begin(), keyed.end());
  order.resize(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = keyed[i].second;
  return order;
}

template <class T>
void erase_value(std::vector<T>& v, T x) {
  auto it = std::find(v.begin(), v.end(), x);
  if (it != v.end()) v.erase(it);
}

class Run {
 public:
  Run(const WorkloadCatalog& cat, const Trace& trace, const SimOptions& o)
      : opt_(o),
        trace_jobs_(trace.jobs),
        engine_(engine_config(o)),
        life_(engine_config(o), lifecycle_options(o)),
        placer_(*this),
        model_{o.sim.interference_util_coeff, o.sim.interference_dram_coeff},
        first_activity_delay_(o.sim),
        union_util_(o.sim.util_combination == "union"),
        history_span_((o.engine.telemetry_window_samples + 2) / o.engine.telemetry_sample_hz) {
    validate(o.sim);
    if (o.cluster.servers.empty()) throw InputError("cluster: needs at least one server");
    for (const auto& s : o.cluster.servers) {
      if (s.gpus < 1 && s.devices.empty()) throw InputError("--gpus-per-server: a server needs at least one GPU");
      if (s.gpu_memory_mib < 1) throw InputError("--gpu-memory: must be positive");
    }
    mps_ = o.sim.sharing == "mps";
    // The refusal caches below (refused lists, the changed_ shortcut, refused_at_floor)
    // hold only if every stage says a refusal stands for more load, less memory and more
    // activity; otherwise every request asks every server.
    cache_ = o.sim.refusal_cache && engine_.refusals_monotone();
    rooms_ = cache_ && engine_.tells_refusals_from_room();
    const int total = o.cluster.total_gpus();
    max_per_server_ = o.cluster.max_gpus_per_server();
    jobs_.reserve(trace.jobs.size());
    records_.resize(trace.jobs.size());
    // Each job's record is put at once where the result wants it, in trace-index order:
    // finish() then moves no record (a million of them, in a random order of places).
    std::vector<std::uint32_t> slot_of(trace.jobs.size());
    {
      const std::vector<std::uint32_t> order = trace_index_order(trace.jobs);
      for (std::uint32_t k = 0; k < order.size(); ++k) slot_of[order[k]] = k;
    }
    // A million jobs name a few dozen workloads (kept names, one address each): each is
    // looked up in the catalog once.
    std::unordered_map<const std::string*, const WorkloadProfile*> profiles;
    for (const auto& tj : trace.jobs) {
      if (tj.num_gpus > total)
        throw InputError(fmt::format("{}: field 'num_gpus': job {} needs {} GPUs; the simulated cluster has {}",
                                     trace.where(tj), tj.index, tj.num_gpus, total));
      Job j;
      auto profile = profiles.try_emplace(&tj.workload.str(), nullptr);
      if (profile.second) profile.first->second = cat.find(tj.workload);
      j.w = profile.first->second;
      if (!j.w) throw InputError(fmt::format("{}: field 'workload_name': unknown workload '{}'", trace.where(tj), tj.workload));
      if (!j.w->problem.empty())
        throw InputError(fmt::format("{}: field 'workload_name': workload '{}' cannot be simulated: {}", trace.where(tj),
                                     tj.workload, j.w->problem));
      j.slot = slot_of[jobs_.size()];
      JobRecord& rec = records_[j.slot];
      rec.trace_index = tj.index;
      rec.workload = tj.workload;
      rec.num_gpus = tj.num_gpus;
      rec.submit = tj.submit_time;
      rec.solo_runtime = work_of(tj, *j.w);
      jobs_.push_back(std::move(j));
    }
    start_ = trace.jobs.empty() ? 0 : trace.jobs.front().submit_time;
    gpus_.resize(total);
    if (o.cluster.servers.size() > (std::size_t{1} << Candidate::kServerBits))
      throw InputError(fmt::format("cluster: {} servers; at most {} can be simulated", o.cluster.servers.size(),
                                   std::size_t{1} << Candidate::kServerBits));
    servers_.reserve(o.cluster.servers.size());
    for (std::size_t s = 0; s < o.cluster.servers.size(); ++s) all_servers_.push_back(static_cast<int>(s));
    for (std::size_t s = 0; s < o.cluster.servers.size(); ++s) servers_.emplace_back(engine_);
    int next = 0;
    for (std::size_t s = 0; s < servers_.size(); ++s) {
      const ServerSpec spec = o.cluster.servers[s];
      const int n = spec.devices.empty() ? spec.gpus : static_cast<int>(spec.devices.size());
      Server& srv = servers_[s];
      srv.first_gpu = next;
      srv.ngpus = n;
      srv.idle_gpus = n;
      whole_idle_gpus_ += n;
      srv.placer.views.resize(n);
      srv.placer.keep_loads();
      for (int g = 0; g < n; ++g, ++next) {
        Gpu& gpu = gpus_[next];
        gpu.server = static_cast<int>(s);
        gpu.local = g;
        gpu.total = spec.devices.empty() ? spec.gpu_memory_mib : spec.devices[g].memory_mib;
        gpu.sm_fraction = spec.devices.empty() ? 1.0 : spec.devices[g].sm_fraction;
        // The driver's own share, in use from the start and never freed (sim.gpu_driver_reserved_mib).
        gpu.used = o.sim.gpu_driver_reserved_mib;
        if (gpu.used >= gpu.total)
          throw InputError(fmt::format("sim.gpu_driver_reserved_mib: {} MiB leaves nothing of server {}'s {} MiB device",
                                       gpu.used, s, gpu.total));
        gpu.last_t = start_;
        gpu.history.push_back({start_, GpuSample{}});
        GpuView& v = srv.placer.views[g];
        v.index = g;
        v.uuid = fmt::format("SIM-{}-{}", s, g);
        v.total_mib = gpu.total;
        v.free_mib = gpu.total - gpu.used;
        srv.free_mib += v.free_mib;
        v.level = TelemetryLevel::Full;
      }
      // The dispatcher's order packs a server's index and free memory into one key.
      if (srv.free_mib > Candidate::kMostFree)
        throw InputError(fmt::format("cluster: server {} has {} MiB of GPU memory; at most {} can be simulated", s,
                                     srv.free_mib, Candidate::kMostFree));
    }
    if (engine_.uses_telemetry())
      for (std::size_t s = 0; s < servers_.size(); ++s) {
        lazy_.push_back(std::make_unique<LazyWindows>(*this, static_cast<int>(s)));
        servers_[s].placer.window_stats = lazy_.back().get();
      }
    if (o.record_timeline) timeline_.resize(total);
    std::vector<DeviceInfo> devices;
    for (const auto& gpu : gpus_) devices.push_back({gpu.total, false, o.sim.gpu_driver_reserved_mib, 0, 0});
    feasibility_.emplace(engine_, devices);
  }

  SimResult run() {
    // Arrivals are taken from the jobs in submit order instead of the event heap (which
    // stays small): at equal times they come first, as if pushed before every other event.
    std::vector<std::uint32_t> arrivals(jobs_.size());
    for (std::uint32_t i = 0; i < arrivals.size(); ++i) arrivals[i] = i;
    const auto arrives_first = [&](std::uint32_t a, std::uint32_t b) {
      return trace_jobs_[a].submit_time < trace_jobs_[b].submit_time;
    };
    // Loaded traces come in submit order already (a stable sort would still merge).
    if (!std::is_sorted(arrivals.begin(), arrivals.end(), arrives_first))
      std::stable_sort(arrivals.begin(), arrivals.end(), arrives_first);
    std::size_t next_arrival = 0;
    while (next_arrival < arrivals.size() || !events_.empty() || !ramps_.empty()) {
      Seconds t = std::numeric_limits<Seconds>::infinity();
      if (!events_.empty()) t = events_.front().t;
      if (!ramps_.empty()) t = std::min(t, ramps_.front().t);
      if (next_arrival < arrivals.size()) t = std::min(t, trace_jobs_[arrivals[next_arrival]].submit_time);
      while (next_arrival < arrivals.size() && trace_jobs_[arrivals[next_arrival]].submit_time == t) {
        ++n_events_;
        handle(Event{t, 0, EvKind::Arrival, static_cast<int>(arrivals[next_arrival++]), 0});
      }
      // The earlier of the heap's first event and the lane's (ramps_, in (time, push
      // order) order): every event comes out in the one order a single heap gives.
      for (;;) {
        const bool lane = !ramps_.empty() && (events_.empty() || events_.front() > ramps_.front());
        const Event* next = lane ? &ramps_.front() : events_.empty() ? nullptr : &events_.front();
        if (!next || next->t != t) break;
        const Event e = *next;
        ++n_events_;
        if (lane) {
          ramps_.pop_front();
          handle(e);
          continue;
        }
        // The heap's first event leaves it only after it is handled: the first event its
        // handling pushes takes its place (replace_first), one sift where a pop and a
        // push take two (a rescheduled completion, a first activity's wake-up). Until then
        // it stays the heap's least: every event pushed meanwhile is at or after its time
        // and later in push order, so the pop below takes it and nothing else.
        first_handled_ = true;
        handle(e);
        if (first_handled_) {
          first_handled_ = false;
          std::pop_heap(events_.begin(), events_.end(), std::greater<Event>());
          events_.pop_back();
        }
      }
      tick(t);
      if (opt_.progress && (n_events_ & 0xffff) == 0)
        opt_.progress(static_cast<double>(n_finished_) / static_cast<double>(std::max<std::size_t>(1, jobs_.size())));
    }
    for (const auto& j : jobs_) {
      if (j.phase != Phase::Done && j.phase != Phase::Stopped)
        throw SimError(fmt::format("simulation stalled: job {} ({}) can never be placed{}", rec(j).trace_index,
                                   rec(j).workload,
                                   last_gang_blocked_ == 0 ? std::string()
                                       : fmt::format(": needs {} whole idle servers' worth of GPUs", last_gang_blocked_)));
    }
    return finish();
  }

 private:
  JobRecord& rec(const Job& j) { return records_[j.slot]; }
  // Solo-seconds of work of a job: its own duration, or its workload's.
  static Seconds work_of(const TraceJob& tj, const WorkloadProfile& w) { return tj.duration_s.value_or(w.solo_runtime_s); }

  // --- events -----------------------------------------------------------------------
  void push(Seconds t, EvKind k, int id, std::uint32_t version) {
    // A ramp's end is its first activity's time plus the one ramp length, pushed as that
    // activity is handled, in time order: so ramp ends come in (time, push order) order
    // and queue in a lane of their own, a push and a pop of a few instructions instead of
    // the heap's (one event in five). One that would not keep the lane in order (none
    // does, but the merge needs the lane sorted) goes to the heap.
    if (k == EvKind::RampDone && (ramps_.empty() || ramps_.back().t <= t)) {
      ramps_.emplace_back(t, seq_++, k, id, version);
      return;
    }
    if (first_handled_) {
      first_handled_ = false;
      replace_first(Event{t, seq_++, k, id, version});
      return;
    }
    events_.emplace_back(t, seq_++, k, id, version);
    std::push_heap(events_.begin(), events_.end(), std::greater<Event>());
  }

  // The heap's first event (handled) replaced by `e`, sifted down to its place. The heap
  // then holds what a pop and a push would leave, and as no two events are equal ((time,
  // push order) is unique) the events come out in the same order whatever its shape.
  void replace_first(const Event& e) {
    Event* h = events_.data();
    const std::size_t n = events_.size();
    std::size_t i = 0;
    for (;;) {
      std::size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && h[c] > h[c + 1]) ++c;
      if (!(e > h[c])) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = e;
  }

  void push_wake(int server, Seconds t) {
    // One Wake event per (server, time): a server has a few pending at most (gate
    // openings, the next telemetry sample), so a scan of its own list finds a twin faster
    // than a tree of every server's.
    auto& pending = servers_[static_cast<std::size_t>(server)].wakes;
    if (std::find(pending.begin(), pending.end(), t) != pending.end()) return;
    pending.push_back(t);
    push(t, EvKind::Wake, server, 0);
  }

  void handle(const Event& e) {
    switch (e.kind()) {
      case EvKind::Arrival: {
        Job& j = jobs_[e.id];
        j.phase = Phase::Queued;
        j.live = std::make_unique<Live>();
        j.live->work = work_of(trace_jobs_[static_cast<std::size_t>(e.id)], *j.w);
        // (spec.name stays empty: no stage reads it, and the record keeps the workload.)
        JobSpec spec;
        spec.id = e.id;
        const TraceJob& tj = trace_jobs_[static_cast<std::size_t>(e.id)];
        spec.num_gpus = tj.num_gpus;
        spec.submit_time = tj.submit_time;
        spec.owner = tj.owner;
        spec.estimates = j.w->estimates;
        spec.hints = j.w->hints;
        spec.predicted_util = j.w->predicted_util;
        estimates_.submitted(spec, *j.w);  // [estimate-chain hook] history of its signature
        life_.submitted(std::move(spec), false, false, e.t);
        dirty_ = true;
        break;
      }
      case EvKind::FirstActivity: {
        Job& j = jobs_[e.id];
        if (j.phase != Phase::Running || j.attempt != e.version) break;
        for (const auto& p : j.live->parts) {
          Server& srv = servers_[p.server];
          srv.placer.set_first_activity(static_cast<std::size_t>(p.running_pos), e.t);
          for (int local : srv.placer.running[static_cast<std::size_t>(p.running_pos)].gpus)
            srv.stale_room(local);  // its gates move
        }
        rec(j).attempts.back().first_activity = e.t;
        life_.first_activity(e.id, e.t);
        const bool ramp = opt_.sim.memory_ramp_s > 0 && opt_.sim.memory_initial_fraction < 1;
        const MiB first = ramp ? static_cast<MiB>(std::ceil(static_cast<double>(j.w->peak_mib) *
                                                            opt_.sim.memory_initial_fraction))
                               : j.w->peak_mib;
        // The observation gate now runs from this activity: it opens at a known time and,
        // until then, refusals of its servers stand (the activity only closes gates), so
        // they are asked again then, not now; a server that remembers no refusal will be
        // asked anyway, and its refusal names that time. Without a gate nothing opens.
        if (auto opens = engine_.gate_opens_after_activity(e.t)) {
          if (*opens > e.t && cache_) {
            for (const auto& p : j.live->parts) {
              const Server& srv = servers_[p.server];
              if (srv.refused_version == srv.version && !srv.refused.empty()) push_wake(p.server, *opens);
            }
          } else {
            touch_servers(j);
          }
        }
        if (!allocate(j, first, e.t)) break;
        j.live->active = true;
        for (int g : j.live->gpus) {
          gpus_[g].active.push_back(e.id);
          sum_activity(g);
        }
        refresh(j.live->gpus, e.t);
        if (ramp) push(e.t + opt_.sim.memory_ramp_s, EvKind::RampDone, e.id, j.attempt);
        break;
      }
      case EvKind::RampDone: {
        Job& j = jobs_[e.id];
        if (j.phase != Phase::Running || j.attempt != e.version) break;
        // Less free memory never turns a refusal into a placement (the stages declare it:
        // Engine::refusals_monotone), so the servers' earlier refusals stand: no touch_servers here.
        allocate(j, j.w->peak_mib - j.live->held_mib, e.t);
        break;
      }
      case EvKind::Complete: {
        Job& j = jobs_[e.id];
        if (j.phase != Phase::Running || j.version != e.version) break;
        // A job slowed down after this event was set keeps it (fewer heap entries) and
        // is rescheduled here for the work it still has.
        // (Work left that the clock cannot resolve any more counts as done.)
        advance(j, e.t);
        const double left = j.live->work - j.live->work_done;
        if (left > 1e-9 * std::max(1.0, j.live->work) && e.t + left / j.live->speed > e.t) {
          j.live->ends_at = e.t + left / j.live->speed;
          push(j.live->ends_at, EvKind::Complete, e.id, j.version);
          break;
        }
        finish_attempt(e.id, e.t, SimOutcome::Completed);
        life_.ended(e.id, {aegis::AttemptOutcome::Completed, ""}, e.t, fx_);
        estimates_.completed(e.id, life_);  // [estimate-chain hook] learn its peak
        life_.forget(e.id);  // its record is the simulator's; the lifecycle keeps live jobs only
        j.live.reset();
        j.phase = Phase::Done;
        rec(j).completed = true;
        rec(j).end = e.t;
        ++n_finished_;
        break;
      }
      case EvKind::Wake:
        erase_value(servers_[static_cast<std::size_t>(e.id)].wakes, e.t);
        bump(e.id);
        break;
    }
  }

  // Something on server s changed that may let it accept what it refused: its earlier
  // refusals no longer hold.
  void bump(int s) {
    servers_[s].version++;
    changed_.push_back(s);
    dirty_ = true;
  }

  void touch_servers(const Job& j) {
    for (const auto& p : j.live->parts) bump(p.server);
  }

  // Allocates `mib` more on every GPU of the job; the job dies of OOM if one cannot hold it.
  bool allocate(Job& j, MiB mib, Seconds t) {
    if (mib <= 0) return true;
    const int id = static_cast<int>(&j - jobs_.data());
    // Under MPS with limits (the limit is the lifecycle's, lifecycle/mps_limit.h; none
    // when placed exclusive), a job that outgrows it fails at its own limit, whatever the
    // GPU has left.
    for (int g : j.live->gpus) {
      const bool over_limit = j.live->mps_limit && j.live->held_mib + mib > *j.live->mps_limit;
      if (over_limit || gpus_[g].used + mib > gpus_[g].total) {
        auto& a = rec(j).attempts.back();
        a.mps_limit = over_limit;
        a.neighbour_oom = !over_limit && gpus_[g].last_launched != id;
        finish_attempt(id, t, SimOutcome::Oom);
        j.phase = Phase::Failed;
        // No log line: the record says which limit it met (above), and nothing of the
        // simulator reads an attempt's detail (formatting one cost ~900 instructions an OOM).
        life_.ended(id, {aegis::AttemptOutcome::Oom, ""}, t, fx_);
        return false;
      }
    }
    for (int g : j.live->gpus) {
      integrate(g, t);
      gpus_[g].used += mib;
      Server& srv = servers_[gpus_[g].server];
      srv.placer.views[gpus_[g].local].free_mib = gpus_[g].total - gpus_[g].used;
      srv.free_mib -= mib;
      srv.stale_room(gpus_[g].local);
      note(g, t);
    }
    j.live->held_mib += mib;
    return true;
  }

  // Ends the current attempt: frees its GPUs and memory, updates neighbours' speeds.
  void finish_attempt(int id, Seconds t, SimOutcome outcome) {
    Job& j = jobs_[id];
    const bool was_active = j.live->active;
    advance(j, t);
    auto& a = rec(j).attempts.back();
    a.end = t;
    a.outcome = outcome;
    for (int g : j.live->gpus) {
      Gpu& gpu = gpus_[g];
      integrate(g, t);
      gpu.used -= j.live->held_mib;
      erase_value(gpu.running, id);
      erase_value(gpu.active, id);
      sum_activity(g);
      Server& srv = servers_[gpu.server];
      GpuView& v = srv.placer.views[gpu.local];
      srv.free_mib += (gpu.total - gpu.used) - v.free_mib;
      v.free_mib = gpu.total - gpu.used;
      v.process_count = static_cast<int>(gpu.active.size());
      srv.stale_room(gpu.local);  // its memory, processes and loads change
      if (gpu.running.empty() && ++srv.idle_gpus == srv.ngpus) whole_idle_gpus_ += srv.ngpus;
      note(g, t);
    }
    for (const auto& p : j.live->parts) {
      bump(p.server);
      Server& srv = servers_[p.server];
      // Swap-remove from the running list handed to the engine.
      if (srv.placer.remove(static_cast<std::size_t>(p.running_pos))) {
        const RunningJob& moved = srv.placer.running[static_cast<std::size_t>(p.running_pos)];
        for (auto& q : jobs_[moved.spec.id].live->parts)
          if (q.server == p.server) q.running_pos = p.running_pos;
        // Its GPUs' loads are summed again in the new order (equal figures: counts,
        // integer sums, a maximum and an "any"), marked all the same.
        for (int local : moved.gpus) srv.stale_room(local);
      }
    }
    j.live->parts.clear();
    j.live->held_mib = 0;
    j.live->active = false;
    ++j.version;
    // A job that never showed activity (it died of OOM at its first allocation, or ended
    // before its first activity) leaves its GPUs' active sets as they were: every speed
    // and every GPU's activity stays what the last refresh made it, so there is nothing
    // to recompute (its process counts and memory were set above).
    if (!was_active) {
      j.live->gpus.clear();
      return;
    }
    const SmallList<int, 8> gpus = std::move(j.live->gpus);
    j.live->gpus.clear();
    refresh(gpus, t);
  }

  // Starts an attempt whose parts (server, launch with local GPU indices) were all accepted.
  void launch(const QueuedJob& job, const Placement& placement, Seconds t) {
    const int id = static_cast<int>(job.spec.id);
    Job& j = jobs_[id];
    j.phase = Phase::Running;
    j.attempt += 1;
    j.version += 1;
    j.live->work_done = 0;
    j.live->last_update = t;
    j.live->speed = 1;
    j.live->active = false;
    j.live->held_mib = 0;
    j.live->gpus.clear();
    j.live->parts.clear();
    j.live->mps_limit.reset();  // set by tick() from the lifecycle's start
    if (rec(j).first_launch < 0) rec(j).first_launch = t;
    AttemptRecord a;
    a.launch = t;
    a.floor_mib = job.recovery.floor_mib;
    for (const auto& part : placement.parts) {
      const int s = part.server;
      const Launch& l = part.launch;
      Server& srv = servers_[s];
      for (int local : l.gpus) {
        const int g = srv.first_gpu + local;
        if (gpus_[g].running.empty() && srv.idle_gpus-- == srv.ngpus) whole_idle_gpus_ -= srv.ngpus;
        gpus_[g].running.push_back(id);
        gpus_[g].last_launched = id;
        j.live->gpus.push_back(g);
        note(g, t);
      }
      a.exclusive = a.exclusive || l.exclusive;
      a.admitted_mib = l.admitted_mib;
      j.live->parts.push_back({s, static_cast<int>(srv.placer.running.size())});
      srv.placer.add(job, l, t);
      for (int local : l.gpus) srv.stale_room(local);
      // A new job only adds load: the server's refusals stand, but the next request must
      // ask it again (it accepted this one).
      changed_.push_back(s);
    }
    a.gpus.assign(j.live->gpus.begin(), j.live->gpus.end());
    rec(j).attempts.push_back(std::move(a));

    j.live->ends_at = t + j.live->work;
    push(j.live->ends_at, EvKind::Complete, id, j.version);
    const Seconds delay = first_activity_delay_(opt_.seed, static_cast<std::uint64_t>(rec(j).trace_index), j.attempt);
    if (delay < j.live->work) push(t + delay, EvKind::FirstActivity, id, j.attempt);
  }

  // --- progress and interference ----------------------------------------------------
  void advance(Job& j, Seconds t) {
    j.live->work_done += j.live->speed * (t - j.live->last_update);
    j.live->last_update = t;
  }

  // Recomputed from scratch (not adjusted) so that sums never drift with history.
  void sum_activity(int g) {
    Gpu& gpu = gpus_[g];
    gpu.active_util = gpu.active_drama = gpu.active_smact = 0;
    for (int k : gpu.active) {
      gpu.active_util += jobs_[k].w->util;
      gpu.active_drama += jobs_[k].w->drama;
      gpu.active_smact += jobs_[k].w->smact;
    }
  }

  // A job's speed on each of its GPUs is that of its device (a MIG instance has a share
  // of the SMs) times what its neighbours leave it (time slicing or MPS); the job runs at
  // its slowest GPU (docs/sharing.md).
  double speed_of(int id) const {
    const Job& j = jobs_[id];
    if (!j.live->active) return 1.0;
    double s = 1.0;
    const ActivityProfile self{j.w->util, j.w->drama};
    for (int g : j.live->gpus) {
      const Gpu& gpu = gpus_[g];
      double on_gpu = device_speed(self.util, gpu.sm_fraction);
      if (gpu.active.size() >= 2) {
        const double other_drama = std::max(0.0, gpu.active_drama - self.drama);
        const double sliced = model_.speed(self, std::max(0.0, gpu.active_util - self.util), other_drama);
        if (mps_) {
          // Kernels of all clients run side by side: SMs are shared only past saturation,
          // DRAM bandwidth always; and MPS does no worse than time slicing.
          const double side_by_side = model_.speed({0.0, self.drama}, 0.0, other_drama) /
                                      std::max(1.0, gpu.active_smact / gpu.sm_fraction);
          on_gpu *= std::max(sliced, side_by_side);
        } else {
          on_gpu *= sliced;
        }
      }
      s = std::min(s, on_gpu);
    }
    return s;
  }

  // Alone on a device with a fraction f of the SMs, a job busy on the GPU a fraction u of
  // its time alone spends (1 - u) + u / f as long per step.
  static double device_speed(double util, double f) {
    if (f >= 1.0) return 1.0;
    return 1.0 / ((1.0 - util) + util / f);
  }

  void touch(int g) {
    if (gpus_[g].touched == stamp_) return;
    gpus_[g].touched = stamp_;
    touched_.push_back(g);
  }

  // Recomputes speeds of every job on `changed` GPUs and the activity of their GPUs.
  void refresh(std::span<const int> changed, Seconds t) {
    touched_.clear();
    ++stamp_;
    for (int g : changed) {
      touch(g);
      for (int id : gpus_[g].running) {
        Job& j = jobs_[id];
        // A job on several changed GPUs is worked out once: its speed reads only the
        // GPUs' active sums, which no step of this loop changes, so a second look would
        // find the speed it just got.
        if (j.live->speed_stamp == stamp_) continue;
        j.live->speed_stamp = stamp_;
        const double s = speed_of(id);
        // Its other GPUs' activity changes only with its speed (these are touched above).
        if (s == j.live->speed) continue;
        for (int h : j.live->gpus) touch(h);
        advance(j, t);
        j.live->speed = s;
        const double ends = t + std::max(0.0, j.live->work - j.live->work_done) / s;
        if (ends < j.live->ends_at) {  // sooner: the pending event would be late
          ++j.version;
          j.live->ends_at = ends;
          push(ends, EvKind::Complete, id, j.version);
        }
      }
    }
    // Resampled in GPU order: deterministic (one GPU, as most refreshes touch, is in order).
    if (touched_.size() > 1) std::sort(touched_.begin(), touched_.end());
    n_visits_ += touched_.size();
    for (int g : touched_) resample(g, t);
  }

  // A GPU's activity is the speed-weighted sum of its active jobs' solo activity, capped at
  // 1; its coarse utilisation by sim.util_combination (the union of busy periods by default).
  void resample(int g, Seconds t) {
    double a = 0, o = 0, d = 0, u = 0, idle = 1;
    for (int id : gpus_[g].active) {
      const Job& j = jobs_[id];
      a += j.live->speed * j.w->smact;
      o += j.live->speed * j.w->smocc;
      d += j.live->speed * j.w->drama;
      u += j.live->speed * j.w->util;
      idle = idle_after(idle, j.live->speed * j.w->util);
    }
    const double util = union_util_ ? 1.0 - idle : std::min(1.0, u);
    const GpuSample s{std::min(1.0, a), std::min(1.0, o), std::min(1.0, d), util};
    Gpu& gpu = gpus_[g];
    Server& srv = servers_[gpu.server];
    int& processes = srv.placer.views[gpu.local].process_count;
    if (processes != static_cast<int>(gpu.active.size())) {
      processes = static_cast<int>(gpu.active.size());
      srv.stale_room(gpu.local);
    }
    if (s.smact == gpu.sample.smact && s.smocc == gpu.sample.smocc && s.drama == gpu.sample.drama &&
        s.util == gpu.sample.util)
      return;
    integrate(g, t);
    // More activity never turns a refusal into a placement (the stages declare it:
    // Engine::refusals_monotone), so only a decrease voids earlier refusals.
    const bool eased = s.smact < gpu.sample.smact || s.smocc < gpu.sample.smocc || s.drama < gpu.sample.drama ||
                       s.util < gpu.sample.util;
    gpu.sample = s;
    if (eased) bump(gpu.server);
    if (!gpu.history.empty() && gpu.history.back().first == t) gpu.history.back().second = s;
    else gpu.history.push_back({t, s});
    gpu.history_version++;
    // Keep one change point older than any window the engine can ask for.
    const Seconds keep = t - history_span_;
    std::size_t drop = 0;
    while (drop + 1 < gpu.history.size() && gpu.history[drop + 1].first <= keep) ++drop;
    if (drop > 0) gpu.history.erase(gpu.history.begin(), gpu.history.begin() + static_cast<std::ptrdiff_t>(drop));
    note(g, t);
  }

  // --- energy and utilisation integrals ---------------------------------------------
  void integrate(int g, Seconds t) {
    Gpu& gpu = gpus_[g];
    const double dt = t - gpu.last_t;
    if (dt <= 0) return;
    const double power = opt_.sim.power_idle_w + (opt_.sim.power_max_w - opt_.sim.power_idle_w) * gpu.sample.smact;
    gpu.energy_j += dt * power;
    gpu.mem_integral += dt * static_cast<double>(gpu.used) / static_cast<double>(gpu.total);
    gpu.sm_integral += dt * gpu.sample.smact;
    gpu.last_t = t;
  }

  void note(int g, Seconds t) {
    if (!opt_.record_timeline) return;
    const Gpu& gpu = gpus_[g];
    GpuPoint p{t, gpu.used, gpu.sample.smact, static_cast<int>(gpu.running.size()), gpu.sample.smocc,
               gpu.sample.drama, gpu.sample.util, static_cast<int>(gpu.active.size())};
    auto& tl = timeline_[g];
    if (!tl.empty() && tl.back().t == t) tl.back() = p;
    else tl.push_back(p);
  }

  // --- telemetry windows ------------------------------------------------------------
  // A server's windows as the engine reads them (WindowStatsSource): a GPU's window is
  // synthesised at the sample instants up to `now` only when a stage first reads it, and
  // its statistics are remembered until it changes. Most GPUs asked about are refused by
  // memory or the observation gate before any stage looks at their telemetry.
  class LazyWindows final : public WindowStatsSource {
   public:
    LazyWindows(Run& run, int server) : run_(run), server_(server) {}
    Seconds now = 0;
    const WindowStats& stats(int local, int metric) override { return run_.window_stats_of(server_, local, metric, now); }

   private:
    Run& run_;
    int server_;
  };

  const WindowStats& window_stats_of(int s, int local, int metric, Seconds t) {
    Server& srv = servers_[s];
    Gpu& gpu = gpus_[srv.first_gpu + local];
    // ensure_window's common case, checked here without the call: the window of this
    // instant's sample is built from the GPU's current history (asked of one GPU for
    // several metrics in a row, and of several GPUs at one instant).
    if (t != sample_of_t_ || gpu.window_k != sample_k_ || gpu.window_history != gpu.history_version)
      ensure_window(srv, local, t);
    const unsigned bit = 1u << metric;
    if (!(gpu.stats_known & bit)) {
      gpu.stats[static_cast<std::size_t>(metric)] = stats_of_runs(gpu.window, metric);
      gpu.stats_known |= bit;
    }
    return gpu.stats[static_cast<std::size_t>(metric)];
  }

  // The statistics of one metric (0 SM activity, 1 SM occupancy, 2 DRAM activity, 3
  // utilisation) of a window kept as runs of equal samples.
  WindowStats stats_of_runs(const std::vector<std::pair<GpuSample, std::uint32_t>>& runs, int metric) {
    const std::size_t n = runs.size();
    // A step function's window is a few runs: on the stack (uninitialised: n are written).
    std::array<SampleRun, 16> few;
    SampleRun* out = few.data();
    if (n > few.size()) {
      metric_runs_.resize(n);
      out = metric_runs_.data();
    }
    const auto* in = runs.data();
    switch (metric) {  // outside the loop: this runs at every window change
      case 0: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.smact, in[i].second}; break;
      case 1: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.smocc, in[i].second}; break;
      case 2: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.drama, in[i].second}; break;
      default: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.util, in[i].second}; break;
    }
    return window_stats(std::span<const SampleRun>(out, n));
  }

  // Builds GPU `local` of server `srv`'s window at time t unless the one it has still holds.
  void ensure_window(Server& srv, int local, Seconds t) {
    const double hz = opt_.engine.telemetry_sample_hz;
    const int n = opt_.engine.telemetry_window_samples;
    // Asked for many GPUs at one instant: the sample index is worked out once per instant.
    if (t != sample_of_t_) {
      sample_of_t_ = t;
      sample_k_ = static_cast<std::int64_t>(std::floor(t * hz + 1e-9));
      // The run's first sample instant: the same at every instant, worked out here rather
      // than for every window built.
      first_sample_k_ = static_cast<std::int64_t>(std::ceil(start_ * hz - 1e-9));
    }
    const std::int64_t k_now = sample_k_;
    const int g = srv.first_gpu + local;
    Gpu& gpu = gpus_[g];
    if (gpu.window_k == k_now && gpu.window_history == gpu.history_version) return;  // the common case
    const std::int64_t k_lo = std::max(k_now - n + 1, first_sample_k_);
    if (window_still_valid(gpu, k_now, k_lo, n, hz)) {
      // Steady: the window at k_now is the same runs; said so, the next ask at this
      // instant takes the common case above (window_still_valid holds the more for a
      // later window_k: its oldest sample only moves later).
      gpu.window_k = k_now;
      return;
    }
    gpu.window_k = k_now;
    gpu.window_history = gpu.history_version;
    gpu.window_n = std::max<std::int64_t>(0, k_now - k_lo + 1);
    // The statistics are kept if the new window spells the same runs (about 2 rebuilds
    // in 5: a change point after the newest sample, a steady window whose history moved):
    // same runs, same statistics, bit for bit.
    window_before_.swap(gpu.window);
    gpu.window.clear();
    const auto& hist = gpu.history;
    constexpr Seconds kInf = std::numeric_limits<Seconds>::infinity();
    auto ts_of = [hz](std::int64_t k) { return static_cast<double>(k) / hz; };
    // The first sample instant at or after time x, as the comparison below decides it.
    auto first_k_at = [&](Seconds x) {
      auto e = static_cast<std::int64_t>(std::ceil(x * hz));
      while (ts_of(e - 1) >= x) --e;
      while (ts_of(e) < x) ++e;
      return e;
    };
    // Sample k reads the last change point at or before its instant (nothing before the
    // first); a change point holds for a run of samples, filled at once.
    std::size_t h = 0;
    for (std::int64_t k = k_lo; k <= k_now;) {
      const Seconds ts = ts_of(k);
      while (h + 1 < hist.size() && hist[h + 1].first <= ts) ++h;
      const bool after = hist[h].first <= ts;
      const GpuSample x = after ? hist[h].second : GpuSample{};
      const Seconds until = after ? (h + 1 < hist.size() ? hist[h + 1].first : kInf) : hist[h].first;
      const std::int64_t end = until < kInf ? std::min(k_now + 1, first_k_at(until)) : k_now + 1;
      if (end > k) gpu.window.push_back({x, static_cast<std::uint32_t>(end - k)});
      k = std::max(k, end);
    }
    if (opt_.sim.telemetry_noise > 0) {  // every sample jitters on its own
      noisy_runs_.clear();
      std::int64_t k = k_lo;
      for (const auto& [x, count] : gpu.window)
        for (std::uint32_t i = 0; i < count; ++i, ++k) noisy_runs_.push_back({noisy(x, g, k), 1});
      gpu.window.swap(noisy_runs_);
    }
    if (!same_runs(gpu.window, window_before_)) gpu.stats_known = 0;
  }

  // Whether two windows are the same runs, every value bit for bit (as the statistics read them).
  static bool same_runs(const std::vector<std::pair<GpuSample, std::uint32_t>>& a,
                        const std::vector<std::pair<GpuSample, std::uint32_t>>& b) {
    if (a.size() != b.size()) return false;
    auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
    for (std::size_t i = 0; i < a.size(); ++i) {
      const GpuSample &x = a[i].first, &y = b[i].first;
      if (a[i].second != b[i].second || bits(x.smact) != bits(y.smact) || bits(x.smocc) != bits(y.smocc) ||
          bits(x.drama) != bits(y.drama) || bits(x.util) != bits(y.util))
        return false;
    }
    return true;
  }

  // A window built earlier still holds if nothing changed since, and either no sample
  // instant passed or the GPU was already steady over the whole earlier window (then every
  // sample, old or new, is the current value).
  bool window_still_valid(const Gpu& gpu, std::int64_t k_now, std::int64_t k_lo, int n, double hz) const {
    if (gpu.window_history != gpu.history_version || gpu.window_k < 0) return false;
    if (gpu.window_k == k_now) return true;
    if (opt_.sim.telemetry_noise > 0 || k_lo != k_now - n + 1) return false;
    const std::int64_t old_lo = gpu.window_k - n + 1;
    return gpu.window_n == n &&
           gpu.history.back().first <= static_cast<double>(old_lo) / hz;
  }

  GpuSample noisy(GpuSample s, int g, std::int64_t k) const {
    auto jitter = [&](double x, std::uint64_t m) {
      if (x <= 0) return x;  // an idle GPU reads zero
      const auto key = static_cast<std::uint64_t>(g) * 8 + m;
      const double z = standard_normal(hash_keys(opt_.seed, 0x7e1e, key, static_cast<std::uint64_t>(k)),
                                       hash_keys(opt_.seed, 0x7e1f, key, static_cast<std::uint64_t>(k)));
      return std::clamp(x + opt_.sim.telemetry_noise * z, 0.0, 1.0);
    };
    return {jitter(s.smact, 0), jitter(s.smocc, 1), jitter(s.drama, 2), jitter(s.util, 3)};
  }

  // True if one of these GPUs of the server has a window that still changes after t.
  bool windows_changing(const Server& srv, std::span<const int> locals, Seconds t) const {
    if (opt_.sim.telemetry_noise > 0) return true;
    const Seconds span = opt_.engine.telemetry_window_samples / opt_.engine.telemetry_sample_hz;
    for (int local : locals)
      if (gpus_[srv.first_gpu + local].history.back().first > t - span) return true;
    return false;
  }

  // --- the dispatcher ---------------------------------------------------------------
  // Asks server s's engine whether it would start `job` now; on a refusal, remembers it
  // and schedules the wake-ups the engine asked for.
  std::optional<Launch> probe(int s, const QueuedJob& job, const Engine::RequestShape& key, Seconds t) {
    Server& srv = servers_[s];
    if (!lazy_.empty()) lazy_[static_cast<std::size_t>(s)]->now = t;
    ++n_ticks_;
    n_visits_ += static_cast<std::uint64_t>(srv.ngpus);
    if (auto l = srv.placer.probe(job, t, false)) return l;
    const Decisions& d = srv.placer.last();
    if (cache_) remember_refusal(srv, key);
    if (d.wake_at && *d.wake_at > t) push_wake(s, *d.wake_at);
    // A job held back by the pressure filter may pass as the windows change, sample by
    // sample, until they settle; ask again at each sample unless it cannot pass at all.
    if (d.blocked && d.blocked->by_pressure && windows_changing(srv, d.blocked->pressure_gpus, t) &&
        !(cache_ && refused_at_floor(srv, job, t, d.blocked->pressure_gpus))) {
      const double hz = opt_.engine.telemetry_sample_hz;
      const double k_now = std::floor(t * hz + 1e-9);
      if (!cache_ || !windows_falling(srv, d.blocked->pressure_gpus, t)) {
        push_wake(s, (k_now + 1) / hz);
      } else if (const std::int64_t j = first_passing_sample(srv, job, t, d.blocked->pressure_gpus); j > 0) {
        // Falling windows: asked again at the first sample that passes, not at every one.
        push_wake(s, (k_now + static_cast<double>(j)) / hz);
      }
    }
    return std::nullopt;
  }

  // The statistics of some GPUs' windows replaced (the others keep theirs as of now, built
  // on demand): what the engine would decide if these GPUs' windows were those.
  class OverriddenWindows final : public WindowStatsSource {
   public:
    // A GPU's window replaced by runs of samples; each metric's statistics are worked out
    // only when the engine reads them (the pressure rule often reads SM activity alone).
    OverriddenWindows(Run& run, WindowStatsSource* rest, std::span<const int> locals)
        : run_(run), rest_(rest), locals_(locals) {
      entries_.resize(locals.size());
    }
    // Entry i (for locals[i]) is these statistics for every metric.
    void set_stats(std::size_t i, const std::array<WindowStats, 4>& stats) {
      entries_[i].stats = stats;
      entries_[i].known = 0xf;
    }
    // Entry i is the window these runs spell out; the caller fills them.
    std::vector<std::pair<GpuSample, std::uint32_t>>& runs(std::size_t i) {
      entries_[i].known = 0;
      entries_[i].runs.clear();
      return entries_[i].runs;
    }
    const WindowStats& stats(int local, int metric) override {
      for (std::size_t i = 0; i < locals_.size(); ++i)
        if (locals_[i] == local) {
          Entry& e = entries_[i];
          const unsigned bit = 1u << metric;
          if (!(e.known & bit)) {
            e.stats[static_cast<std::size_t>(metric)] = run_.stats_of_runs(e.runs, metric);
            e.known |= bit;
          }
          return e.stats[static_cast<std::size_t>(metric)];
        }
      return rest_->stats(local, metric);
    }

   private:
    struct Entry {
      std::vector<std::pair<GpuSample, std::uint32_t>> runs;
      std::array<WindowStats, 4> stats;
      unsigned known = 0;  // bit m: stats[m] is worked out
    };
    Run& run_;
    WindowStatsSource* rest_;
    std::span<const int> locals_;
    std::vector<Entry> entries_;
  };

  // The engine asked directly whether it would start `job` on server `srv` at t with these
  // windows: a what-if, not a placement (the server's state stays).
  bool refused_with(Server& srv, const QueuedJob& job, Seconds t, OverriddenWindows& windows) {
    Snapshot snap;
    snap.now = t;
    snap.only_job = &job;
    snap.gpus = srv.placer.views;
    snap.running = srv.placer.running;
    snap.loads = srv.placer.loads();
    snap.state = srv.placer.state;
    snap.explain = false;
    snap.window_stats = srv.placer.window_stats ? &windows : nullptr;
    ++n_ticks_;
    n_visits_ += static_cast<std::uint64_t>(srv.ngpus);
    engine_.tick(snap, what_if_);
    return what_if_.launches.empty();
  }

  // Until the next event, every window of these GPUs is made of samples already in it and
  // of the GPU's current value. The pressure verdict only grows with activity (every risk
  // statistic is at least the window's minimum times the weights' sum, and the rule is
  // monotone), so if the engine refuses even windows holding just the component-wise
  // minimum of those values, no later window of this quiet period can pass. Asked only
  // when every stage declares its refusals monotone (cache_).
  bool refused_at_floor(Server& srv, const QueuedJob& job, Seconds t, std::span<const int> locals) {
    OverriddenWindows windows(*this, srv.placer.window_stats, locals);
    for (std::size_t i = 0; i < locals.size(); ++i) {
      const Gpu& gpu = gpus_[srv.first_gpu + locals[i]];
      GpuSample m = gpu.sample;
      for (const auto& [x, count] : gpu.window) {
        m.smact = std::min(m.smact, x.smact);
        m.smocc = std::min(m.smocc, x.smocc);
        m.drama = std::min(m.drama, x.drama);
        m.util = std::min(m.util, x.util);
      }
      // A window of that one sample, as the engine would summarise it.
      const double one[4] = {m.smact, m.smocc, m.drama, m.util};
      std::array<WindowStats, 4> stats;
      for (std::size_t k = 0; k < 4; ++k) stats[k] = {one[k], one[k], one[k], one[k]};  // every statistic of one sample
      windows.set_stats(i, stats);
    }
    return refused_with(srv, job, t, windows);
  }

  // True if, until the next event, every later window of these GPUs is at most the current
  // one sample by sample: each is full, never rises from one sample to the next, and the
  // GPU's current value is at most its newest sample (activity that fell when a job ended).
  // Each later sample drops the oldest and repeats the current value, so every statistic
  // (sums in the same order, quantiles, an EWMA with positive weights) only falls, and so
  // does the pressure verdict: once a window passes, every later one does.
  bool windows_falling(Server& srv, std::span<const int> locals, Seconds t) {
    if (opt_.sim.telemetry_noise > 0) return false;
    const int n = opt_.engine.telemetry_window_samples;
    auto at_most = [](const GpuSample& a, const GpuSample& b) {
      return a.smact <= b.smact && a.smocc <= b.smocc && a.drama <= b.drama && a.util <= b.util;
    };
    for (int local : locals) {
      ensure_window(srv, local, t);
      const Gpu& gpu = gpus_[srv.first_gpu + local];
      if (gpu.window_n != n || gpu.window.empty()) return false;
      const GpuSample* prev = nullptr;
      for (const auto& [x, count] : gpu.window) {
        if (prev && !at_most(x, *prev)) return false;
        prev = &x;
      }
      if (!at_most(gpu.sample, *prev)) return false;
    }
    return true;
  }

  // With falling windows (windows_falling), the first later sample, 1 to the window's
  // length, at which the engine would start `job` if nothing happened until then, found by
  // bisection over what-ifs (the verdict only turns once); 0 if none does.
  std::int64_t first_passing_sample(Server& srv, const QueuedJob& job, Seconds t, std::span<const int> locals) {
    const std::int64_t n = opt_.engine.telemetry_window_samples;
    OverriddenWindows windows(*this, srv.placer.window_stats, locals);
    // The window j samples on: the oldest j samples gone, the current value j times.
    auto refused_after = [&](std::int64_t j) {
      for (std::size_t i = 0; i < locals.size(); ++i) {
        const Gpu& gpu = gpus_[srv.first_gpu + locals[i]];
        auto& future = windows.runs(i);
        std::int64_t drop = j;
        for (const auto& [x, count] : gpu.window) {
          const std::int64_t gone = std::min<std::int64_t>(drop, count);
          drop -= gone;
          if (count > gone) future.push_back({x, static_cast<std::uint32_t>(count - gone)});
        }
        future.push_back({gpu.sample, static_cast<std::uint32_t>(j)});
      }
      return refused_with(srv, job, t, windows);
    };
    // Passes at n, without asking: n samples on, each window is n copies of the current
    // value, which for falling windows is the component-wise minimum of the window and
    // the current value, the one-sample window refused_at_floor() found passing (probe()
    // asks it first, and a steady window's statistics are that value, every one).
    std::int64_t lo = 0, hi = n;  // refused at lo (now), passes at hi
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (refused_after(mid)) lo = mid;
      else hi = mid;
    }
    return hi;
  }

  void remember_refusal(Server& srv, const Engine::RequestShape& key) {
    if (srv.refused_version != srv.version) {
      srv.refused.clear();
      srv.refused_version = srv.version;
    }
    // Only the smallest refusals matter (a request covering a larger one covers this
    // one): those this one covers go, so the list stays short.
    // Kept sorted by kind: a lookup reads only the refusals of its own kind.
    std::erase_if(srv.refused, [&](const Engine::RequestShape& r) { return r.covers(key); });
    srv.refused.insert(std::upper_bound(srv.refused.begin(), srv.refused.end(), key, by_kind), key);
  }

  bool refused_already(int s, const Engine::RequestShape& request) const {
    const Server& srv = servers_[s];
    if (!cache_ || srv.refused_version != srv.version) return false;
    for (auto it = std::lower_bound(srv.refused.begin(), srv.refused.end(), request, by_kind);
         it != srv.refused.end() && it->kind == request.kind; ++it)
      if (request.covers(*it)) return true;
    return false;
  }

  static bool by_kind(const Engine::RequestShape& a, const Engine::RequestShape& b) { return a.kind < b.kind; }

  // True when server s's engine would refuse `request` for n GPUs at t, told from the
  // server's room without an ask (Engine::room_refuses); a refusal by a gate is
  // remembered as an asked one would be, with the wake-up at that gate's opening.
  bool room_refuses(int s, const Engine::RequestShape& request, int n, Seconds t) {
    if (!rooms_) return false;
    Server& srv = servers_[static_cast<std::size_t>(s)];
    if (srv.room_stale) {
      srv.has_room = engine_.room_update(srv.placer.views, srv.placer.loads(), srv.room_changed, srv.room);
      srv.room_stale = false;
      srv.room_changed = 0;
      n_visits_ += static_cast<std::uint64_t>(srv.ngpus);
    }
    Seconds wake = 0;
    if (!srv.has_room || !engine_.room_refuses(srv.room, request, n, t, wake)) return false;
    // A refusal that names no gate stands until memory or load is freed, which rebuilds
    // the room: it needs no memo (nor the wake-up a job's first activity gives servers
    // that remember refusals, for their gates).
    if (wake < std::numeric_limits<Seconds>::infinity()) {
      remember_refusal(srv, request);
      if (wake > t) push_wake(s, wake);
    }
    return true;
  }

  // Servers in the order the dispatcher asks them: those with enough idle GPUs for the
  // job to run alone first (fewest idle GPUs first: keeps whole servers free for large
  // jobs), then, if the policy shares GPUs, the others by most free memory.
  // Where `job` would start: the first server that takes it in the dispatcher's order.
  //
  // Servers listed but not asked (the job started on a better one) stay candidates: they
  // are kept at the front of order_ (left_ of them) rather than put back in changed_.
  // When the next call is the very next placement of the same lifecycle pass (nothing
  // happened since but the launch, which touched only the chosen server and listed it in
  // changed_) for a request equal to theirs (same shape, GPU count, sharing, time), each
  // kept entry is what listing its server again would give: the filters below read only
  // the server (its refusals, idle GPUs, room, free memory: unchanged, as no event ran
  // and only the chosen server was asked or launched on) and the request. Their side
  // effects (a remembered refusal, a wake-up) come only with a refusal, and these servers
  // were listed, i.e. not refused. So the entries are kept as they are and only the
  // changed servers are listed (whole Philly trace under aegis: 2.55M of 2.71M listings
  // were such servers listed again; 89 % of the placements that follow a start ask for
  // the same as the one before).
  std::optional<Placement> place_single(int id, const QueuedJob& job, Seconds t, bool follows_start) {
    const int n = job.spec.num_gpus;
    const bool shares = engine_.config().collocate && !job.recovery.exclusive_only;
    const Engine::RequestShape key = jobs_[id].live->request;
    // After a pass for request P, every server outside changed_ and the kept entries has
    // refused (at its current version) something P covers, or cannot take P's size at
    // all. So for a request that covers P only those need asking; otherwise all do.
    const bool every_server = !cache_ || !key.covers(scanned_);
    const bool keep = follows_start && !every_server && left_ > 0 && n == left_n_ && shares == left_shares_ &&
                      t == left_t_ && key == scanned_;
    scanned_ = key;
    if (order_.size() < servers_.size()) order_.resize(servers_.size());
    Candidate* const order = order_.data();
    std::size_t listed = 0;
    candidates_.clear();
    if (every_server) {
      changed_.clear();
    } else {
      // Each server once (the selection below orders them; their order here does not matter).
      ++candidate_stamp_;
      if (keep) {
        listed = left_;
      } else {
        for (std::size_t i = 0; i < left_; ++i) {
          const int s = order[i].server();
          servers_[s].candidate_stamp = candidate_stamp_;
          candidates_.push_back(s);
        }
      }
      for (int s : changed_) {
        if (servers_[s].candidate_stamp == candidate_stamp_) continue;
        servers_[s].candidate_stamp = candidate_stamp_;
        // A kept server that changed since loses its entry and is listed afresh. Only the
        // one the job started on can have changed, and it was asked, so not kept: any
        // other is looked for all the same.
        if (keep && s != left_started_)
          for (std::size_t i = 0; i < listed; ++i)
            if (order[i].server() == s) {
              order[i] = order[--listed];
              break;
            }
        candidates_.push_back(s);
      }
      changed_.clear();
    }
    left_ = 0;
    // Every server is the list of all of them, made once (11k such passes on the whole
    // trace, 64 servers each), not appended server by server at each pass.
    const std::span<const int> listing = every_server ? std::span<const int>(all_servers_) : candidates_;
    n_visits_ += listing.size() + listed;
    // Written in place in an array of one entry per server: an append per server is a
    // call where the compiler declines to inline it (it did in a unity batch).
    for (int s : listing) {
      const Server& srv = servers_[s];
      if (srv.ngpus < n) continue;
      if (refused_already(s, key)) continue;
      const bool alone = srv.idle_gpus >= n;
      if ((!alone && !shares) || room_refuses(s, key, n, t)) continue;
      order[listed++] = alone ? Candidate::alone(srv.idle_gpus, s) : Candidate::sharing(srv.free_mib, s);
    }
    // Taken in order, the best one left at a time: on average less than one server is
    // asked per pass (most are refused from the caches above), so selecting the first by
    // a scan beats ordering them all (a heap cost 7 % of a whole-trace run).
    while (listed > 0) {
      Candidate* best = std::min_element(order, order + listed);
      const int s = best->server();
      *best = order[--listed];
      if (auto l = probe(s, job, key, t)) {
        // Servers not asked yet stay candidates for the next request (kept in place).
        left_ = listed;
        left_n_ = n;
        left_shares_ = shares;
        left_t_ = t;
        left_started_ = s;
        Placement p;
        p.parts.emplace_back(s, std::move(*l), MiB{0});  // made in place
        return p;
      }
    }
    return std::nullopt;
  }

  // A job larger than any server runs alone on whole idle servers, lowest index first.
  std::optional<Placement> place_gang(const QueuedJob& job, Seconds t) {
    int remaining = job.spec.num_gpus;
    // Too few whole idle servers: no part could be kept, so none is asked for (a gang job
    // waiting at the head would otherwise be tried on every idle server at every pass).
    // Their GPUs are counted as servers fill and empty (whole_idle_gpus_), not by a walk
    // over every server at each pass.
    if (whole_idle_gpus_ < remaining) {
      last_gang_blocked_ = job.spec.num_gpus;
      return std::nullopt;
    }
    Placement p;
    for (int s = 0; s < static_cast<int>(servers_.size()) && remaining > 0; ++s) {
      ++n_visits_;
      const Server& srv = servers_[s];
      if (srv.idle_gpus < srv.ngpus) continue;
      QueuedJob part = job;
      part.spec.num_gpus = std::min(remaining, srv.ngpus);
      part.recovery.exclusive_only = true;
      if (auto l = probe(s, part, engine_.request_shape(part), t)) {
        remaining -= part.spec.num_gpus;
        p.parts.emplace_back(s, std::move(*l), MiB{0});  // made in place
      }
    }
    if (remaining > 0) {
      last_gang_blocked_ = job.spec.num_gpus;  // told only if the run stalls (formatting it each pass cost 1 %)
      return std::nullopt;
    }
    return p;
  }

  // The simulator's side of the lifecycle (lifecycle/placer.h): the cluster dispatcher.
  class Dispatcher final : public Placer {
   public:
    explicit Dispatcher(Run& run) : run_(run) {}
    std::optional<Placement> place(const QueuedJob& job, Seconds t) override {
      const int id = static_cast<int>(job.spec.id);
      Job& j = run_.jobs_[id];
      if (j.live->request_floor != job.recovery.floor_mib || j.live->request_exclusive != job.recovery.exclusive_only) {
        j.live->request = run_.engine_.request_shape(job);
        j.live->request_floor = job.recovery.floor_mib;
        j.live->request_exclusive = job.recovery.exclusive_only;
      }
      // Only the very next placement of a pass may keep the servers a start left unasked.
      const bool follows_start = run_.started_last_;
      run_.started_last_ = false;
      auto p = job.spec.num_gpus > run_.max_per_server_ ? run_.place_gang(job, t)
                                                        : run_.place_single(id, job, t, follows_start);
      if (p)
        for (auto& part : p->parts) {
          part.gpu_total_mib = std::numeric_limits<MiB>::max();
          for (int local : part.launch.gpus)
            part.gpu_total_mib = std::min(part.gpu_total_mib, run_.gpus_[run_.servers_[part.server].first_gpu + local].total);
        }
      return p;
    }
    void started(const QueuedJob& job, const Placement& p, Seconds t) override {
      run_.launch(job, p, t);
      run_.started_last_ = true;
    }
    std::optional<std::string> never_runs(const QueuedJob& job) const override {
      // No device of this cluster could hold it (e.g. a MIG instance too small for it): it
      // leaves the queue as stopped instead of blocking everything behind it.
      // Asked for every queued job the lifecycle looks at, each pass: the answer depends only
      // on the job and its recovery floor, so a yes is remembered until the floor moves.
      Live& live = *run_.jobs_[static_cast<std::size_t>(job.spec.id)].live;
      if (live.feasible_floor == job.recovery.floor_mib) return std::nullopt;
      auto why = run_.feasibility_->why_never_runs(job);
      if (!why) live.feasible_floor = job.recovery.floor_mib;
      return why;
    }
    // Without the requeue's words: the simulator shows no waiting job's reason (a stopped
    // job's reason, which it records, is always written).
    std::variant<Requeue, Stop> recover(const Failure& f) const override { return run_.engine_.recover(f, false); }

   private:
    Run& run_;
  };

  // The policy's engine, told whether the MPS rules apply (--sharing).
  static EngineConfig engine_config(const SimOptions& o) {
    EngineConfig c = o.engine;
    c.mps = o.sim.sharing == "mps";
    return c;
  }

  static LifecycleOptions lifecycle_options(const SimOptions& o) {
    LifecycleOptions l;
    l.report_changes = false;  // no store: the jobs that finished are all it needs
    l.start_placements = false;  // its dispatcher hears of each start directly
    l.mps_limits = o.sim.sharing == "mps" && o.sim.mps_memory_limits;
    return l;
  }

  // Failures through the recovery rule, then the queues head first: the lifecycle's pass,
  // with the dispatcher as its placer; the simulator only keeps its records.
  void tick(Seconds t) {
    // With no job new to the queue and no server changed since the last pass, that pass's
    // answers stand (refusals stand until a server changes; time opens gates only through
    // wakes, which change their server), so the pass is skipped. Without the refusal
    // caches nothing is assumed.
    if (life_.has_work() && (dirty_ || !cache_)) {
      dirty_ = false;
      Effects& fx = fx_;
      life_.schedule(t, placer_, fx);
      started_last_ = false;  // the pass is over: events come next
      for (const auto& st : fx.starts) jobs_[st.job].live->mps_limit = st.mps_limit_mib;
      // A job requeued after an OOM keeps its phase until launch() sets it running again.
      for (JobId id : fx.finished) {
        const LifeJob* lj = life_.find(id);
        if (lj->state != JobState::Failed) continue;  // completions are recorded as they happen
        Job& j = jobs_[id];
        j.phase = Phase::Stopped;
        rec(j).end = t;
        rec(j).stop_reason = lj->reason;
        life_.forget(id);
        j.live.reset();
        ++n_finished_;
      }
    }
    if (opt_.record_timeline) {
      const int waiting = static_cast<int>(life_.queued_count());
      if (queue_timeline_.empty() || queue_timeline_.back().second != waiting) {
        if (!queue_timeline_.empty() && queue_timeline_.back().first == t) queue_timeline_.back().second = waiting;
        else queue_timeline_.push_back({t, waiting});
      }
    }
  }

  SimResult finish() {
    SimResult r;
    r.policy = opt_.policy_name;
    r.engine = engine_.describe();
    r.start = start_;
    r.end = start_;
    for (const auto& rec : records_) r.end = std::max(r.end, rec.end);
    double mem = 0, sm = 0;
    for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
      integrate(g, r.end);
      r.energy_j += gpus_[g].energy_j;
      mem += gpus_[g].mem_integral;
      sm += gpus_[g].sm_integral;
      r.gpu_total_mib.push_back(gpus_[g].total);
      r.gpu_server.push_back(gpus_[g].server);
    }
    const double span = (r.end - r.start) * static_cast<double>(gpus_.size());
    r.gpu_mem_util_mean = span > 0 ? mem / span : 0;
    r.sm_util_mean = span > 0 ? sm / span : 0;
    r.jobs = std::move(records_);  // in trace-index order from the start
    r.gpu_timeline = std::move(timeline_);
    r.queue_timeline = std::move(queue_timeline_);
    r.events = n_events_;
    r.ticks = n_ticks_;
    r.visits = n_visits_;
    return r;
  }

  // A server in the dispatcher's order: those where the job runs alone on idle GPUs
  // first, fewest idle GPUs first, then those where it would share, most free memory
  // first; ties by index. The rank, its figure and the index are one unsigned key, so
  // that picking the best (a scan of some 20 entries per ask) compares one integer: the
  // top bit is the rank, the low kServerBits the server's index, the 43 bits between the
  // idle GPUs (0 to a server's GPU count) or kMostFree minus the free memory (a server's
  // free memory is its GPUs' capacity less what they hold: from 0 to its capacity, which
  // the constructor holds to kMostFree, as it holds the servers to 2^kServerBits). So the
  // keys order exactly as the (rank, figure, index) triples do.
  struct Candidate {
    static constexpr int kServerBits = 20;
    static constexpr MiB kMostFree = (MiB{1} << 43) - 1;  // 8 EiB in MiB
    std::uint64_t key;
    int server() const { return static_cast<int>(key & ((std::uint64_t{1} << kServerBits) - 1)); }
    static Candidate alone(int idle, int server) {
      return {static_cast<std::uint64_t>(idle) << kServerBits | static_cast<std::uint64_t>(server)};
    }
    static Candidate sharing(MiB free, int server) {
      return {(std::uint64_t{1} << 63) | static_cast<std::uint64_t>(kMostFree - free) << kServerBits |
              static_cast<std::uint64_t>(server)};
    }
    bool operator<(const Candidate& o) const { return key < o.key; }
  };

  const SimOptions& opt_;
  const std::vector<TraceJob>& trace_jobs_;  // job id = position here
  Engine engine_;
  Lifecycle life_;
  Dispatcher placer_;
  Effects fx_;  // the lifecycle's answers, kept for their lists' storage (read at once)
  SimEstimates estimates_{opt_.engine};  // [estimate-chain hook] the chain, as aegisd feeds it
  InterferenceModel model_;
  FirstActivityDelay first_activity_delay_;  // of opt_.sim, its constants worked out once
  bool union_util_;  // sim.util_combination
  Seconds history_span_;  // how far back a GPU's history must reach (resample): one division, once
  std::vector<Job> jobs_;
  std::vector<JobRecord> records_;  // per job, in trace-index order (Job::slot)
  std::vector<Gpu> gpus_;
  std::vector<Server> servers_;
  // The event heap, earliest first (std::push_heap / std::pop_heap with std::greater, as
  // std::priority_queue keeps it; a vector so that its first event can be replaced).
  std::vector<Event> events_;
  bool first_handled_ = false;  // events_.front() is being handled: the next push replaces it
  std::deque<Event> ramps_;  // RampDone events, in (time, push order) order (push())
  std::vector<int> touched_;
  std::vector<std::unique_ptr<LazyWindows>> lazy_;  // per server (its placer's window source)
  std::vector<SampleRun> metric_runs_;                              // one metric of a window
  std::vector<std::pair<GpuSample, std::uint32_t>> noisy_runs_;  // scratch of ensure_window
  std::vector<std::pair<GpuSample, std::uint32_t>> window_before_;  // ensure_window: the runs it replaces
  Decisions what_if_;  // refused_with's answer, kept for its storage
  std::uint64_t stamp_ = 0;
  std::vector<Candidate> order_;  // place_single's servers to ask (one entry per server)
  std::vector<int> changed_, candidates_;  // servers changed since the last full pass
  std::vector<int> all_servers_;           // 0, 1, ..., servers_.size() - 1
  std::uint64_t candidate_stamp_ = 0;
  // The first left_ entries of order_: servers listed but not asked by the last
  // place_single that started its job, for n GPUs, sharing or not, at time t.
  std::size_t left_ = 0;
  int left_n_ = 0;
  bool left_shares_ = false;
  Seconds left_t_ = 0;
  int left_started_ = -1;  // the server that last call's job started on (asked, so not kept)
  bool started_last_ = false;  // the lifecycle started a job and has asked nothing since
  bool dirty_ = true;  // a job arrived or a server changed since the last lifecycle pass
  Engine::RequestShape scanned_{kNoJob, 0, 0};  // request of the last pass
  std::vector<std::vector<GpuPoint>> timeline_;
  std::vector<std::pair<Seconds, int>> queue_timeline_;
  int whole_idle_gpus_ = 0;  // GPUs of the servers with every GPU idle (place_gang's bound)
  int last_gang_blocked_ = 0;  // GPUs of the last gang job that found too few idle servers
  int max_per_server_ = 0;
  bool mps_ = false;
  bool cache_ = true;  // refusal caches on (sim.refusal_cache and monotone stages)
  Seconds sample_of_t_ = std::numeric_limits<Seconds>::quiet_NaN();  // ensure_window's last instant ...
  std::int64_t sample_k_ = 0;                                            // ... and its sample index
  std::int64_t first_sample_k_ = 0;                                      // ... and the run's first
  bool rooms_ = false;  // with cache_: the engine tells refusals from a room (Engine::tells_refusals_from_room)
  std::optional<Feasibility> feasibility_;  // of the cluster's devices
  Seconds start_ = 0;
  std::uint64_t seq_ = 0, n_events_ = 0, n_ticks_ = 0, n_visits_ = 0;
  std::size_t n_finished_ = 0;
};

}  // namespace

ClusterSpec ClusterSpec::uniform(int servers, int gpus_per_server, MiB gpu_memory_mib) {
  ClusterSpec c;
  c.servers.assign(static_cast<std::size_t>(std::max(servers, 0)), ServerSpec{gpus_per_server, gpu_memory_mib, {}});
  return c;
}

ClusterSpec ClusterSpec::parse(const std::string& spec) {
  ClusterSpec c;
  c.servers.clear();
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string part = spec.substr(pos, comma - pos);
    long long n[3] = {0, 0, 0};
    int k = 0;
    std::size_t p = 0;
    bool ok = !part.empty();
    while (ok && p < part.size() && k < 3) {
      std::size_t x = part.find('x', p);
      if (x == std::string::npos) x = part.size();
      const std::string num = part.substr(p, x - p);
      ok = !num.empty() && num.find_first_not_of("0123456789") == std::string::npos && num.size() < 10;
      if (ok) n[k++] = std::stoll(num);
      p = x + 1;
    }
    if (!ok || k != 3 || p <= part.size() || n[0] < 1 || n[1] < 1 || n[2] < 1)
      throw InputError(fmt::format("--gpu-memory: '{}' is not SERVERSxGPUSxMIB (e.g. 4x8x81920)", part));
    for (long long i = 0; i < n[0]; ++i) c.servers.push_back(ServerSpec{static_cast<int>(n[1]), n[2], {}});
    pos = comma + 1;
  }
  return c;
}

namespace {
int devices_of(const ServerSpec& s) { return s.devices.empty() ? s.gpus : static_cast<int>(s.devices.size()); }
}  // namespace

int ClusterSpec::total_gpus() const {
  int n = 0;
  for (const auto& s : servers) n += devices_of(s);
  return n;
}

int ClusterSpec::max_gpus_per_server() const {
  int n = 0;
  for (const auto& s : servers) n = std::max(n, devices_of(s));
  return n;
}

ClusterSpec ClusterSpec::with_mig(const std::string& layout) const {
  // Per-GPU lists of profile names; each GPU's memory names its model (core/mig_models.h),
  // whose table gives the instances' real memory and SMs and says which layouts exist.
  std::vector<std::vector<std::string>> lists;
  std::size_t pos = 0;
  while (pos <= layout.size()) {
    const std::size_t semi = std::min(layout.find(';', pos), layout.size());
    std::vector<std::string> list;
    std::size_t p = pos;
    while (p <= semi) {
      const std::size_t comma = std::min(layout.find(',', p), semi);
      list.push_back(layout.substr(p, comma - p));
      p = comma + 1;
    }
    lists.push_back(std::move(list));
    pos = semi + 1;
  }
  ClusterSpec out;
  out.servers.clear();
  std::size_t next = 0;
  for (const auto& s : servers) {
    const mig::Model* model = mig::model_for_memory(s.gpu_memory_mib);
    if (!model)
      throw InputError(fmt::format("--sharing mig: a GPU of {} MiB is no MIG-capable model aegis knows ({})",
                                   s.gpu_memory_mib, mig::known_models()));
    ServerSpec m = s;
    m.devices.clear();
    for (int g = 0; g < s.gpus; ++g) {
      const auto& list = lists[next++ % lists.size()];
      if (const std::string why = mig::check_layout(*model, list); !why.empty())
        throw InputError("--sharing mig: " + why);
      for (const auto& name : list) {
        const mig::Profile& p = *mig::find_profile(*model, name);
        m.devices.push_back({p.memory_mib, mig::sm_share(*model, p), name});
      }
    }
    out.servers.push_back(std::move(m));
  }
  return out;
}

std::string ClusterSpec::describe() const {
  std::string out;
  if (!servers.empty() && !servers.front().devices.empty()) {
    std::string profiles;
    for (const auto& d : servers.front().devices)
      profiles += (profiles.empty() ? "" : ",") + d.profile;
    return fmt::format("{} server(s), {} MIG instances ({} on the first server)", servers.size(), total_gpus(), profiles);
  }
  for (std::size_t i = 0; i < servers.size();) {
    std::size_t k = i;
    while (k < servers.size() && servers[k].gpus == servers[i].gpus &&
           servers[k].gpu_memory_mib == servers[i].gpu_memory_mib)
      ++k;
    out += fmt::format("{}{} x {} x {} MiB", out.empty() ? "" : " + ", k - i, servers[i].gpus, servers[i].gpu_memory_mib);
    i = k;
  }
  return out;
}

SimResult simulate(const WorkloadCatalog& catalog, const Trace& trace, const SimOptions& options) {
  Run run(catalog, trace, options);
  SimResult r = run.run();
  r.trace = trace.name;
  return r;
}

}  // namespace aegis
