#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <queue>
#include <set>

#include "sched/engine.h"
#include "sim/csv.h"
#include "sim/models/interference.h"
#include "sim/models/random.h"
#include "sim/models/startup.h"

namespace aegis {

namespace {

enum class EvKind : std::uint8_t { Arrival, FirstActivity, RampDone, Complete, Wake };

struct Event {
  Seconds t = 0;
  std::uint64_t seq = 0;
  EvKind kind = EvKind::Wake;
  int job = -1;
  std::uint64_t version = 0;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

enum class Phase { Pending, Queued, Running, Failed, Done, Stopped };

struct Job {
  const TraceJob* tj = nullptr;
  const WorkloadProfile* w = nullptr;
  Seconds work = 0;                // solo-seconds of work: its own duration or the workload's
  JobSpec spec;
  RecoveryState recovery;
  Phase phase = Phase::Pending;
  // The current attempt.
  std::uint64_t attempt = 0;       // launches so far; identifies activity events
  std::uint64_t version = 0;       // identifies the valid completion event
  Seconds last_update = 0;
  double work_done = 0;            // solo-seconds of work done in this attempt
  double speed = 1;
  bool active = false;             // has shown GPU activity
  MiB held_mib = 0;                // per GPU
  std::vector<int> gpus;
  int running_pos = -1;            // index in Run::running_
  JobRecord rec;
};

struct Gpu {
  MiB total = 0;
  MiB used = 0;
  std::vector<int> running;  // jobs launched here
  std::vector<int> active;   // jobs that have shown activity here
  GpuSample sample{};        // current whole-GPU activity
  std::vector<std::pair<Seconds, GpuSample>> history;  // change points, oldest first
  std::vector<GpuSample> window;                        // buffer handed to the engine
  Seconds last_t = 0;
  double energy_j = 0, mem_integral = 0, sm_integral = 0;
};

void erase_value(std::vector<int>& v, int x) {
  auto it = std::find(v.begin(), v.end(), x);
  if (it != v.end()) v.erase(it);
}

class Run {
 public:
  Run(const WorkloadCatalog& cat, const Trace& trace, const SimOptions& o)
      : opt_(o), engine_(o.engine), model_{o.sim.interference_util_coeff, o.sim.interference_dram_coeff} {
    validate(o.sim);
    if (o.cluster.servers.size() != 1) throw InputError("cluster simulation is not implemented yet");
    const ServerSpec server = o.cluster.servers[0];
    if (server.gpus < 1) throw InputError("--gpus: a server needs at least one GPU");
    if (server.gpu_memory_mib < 1) throw InputError("--gpu-memory: must be positive");
    jobs_.reserve(trace.jobs.size());
    for (const auto& tj : trace.jobs) {
      if (tj.num_gpus > server.gpus)
        throw InputError(fmt::format("{}: field 'num_gpus': job {} needs {} GPUs; the simulated server has {}",
                                     tj.where, tj.index, tj.num_gpus, server.gpus));
      Job j;
      j.tj = &tj;
      j.w = cat.find(tj.workload);
      if (!j.w) throw InputError(fmt::format("{}: field 'workload_name': unknown workload '{}'", tj.where, tj.workload));
      j.spec.id = static_cast<JobId>(jobs_.size());
      j.spec.name = tj.workload;
      j.spec.num_gpus = tj.num_gpus;
      j.spec.submit_time = tj.submit_time;
      j.spec.estimates = j.w->estimates;
      j.spec.hints = j.w->hints;
      j.rec.trace_index = tj.index;
      j.rec.workload = tj.workload;
      j.rec.num_gpus = tj.num_gpus;
      j.rec.submit = tj.submit_time;
      j.work = tj.duration_s.value_or(j.w->solo_runtime_s);
      j.rec.solo_runtime = j.work;
      jobs_.push_back(std::move(j));
    }
    start_ = jobs_.empty() ? 0 : trace.jobs.front().submit_time;
    gpus_.resize(server.gpus);
    views_.resize(server.gpus);
    for (int g = 0; g < server.gpus; ++g) {
      gpus_[g].total = server.gpu_memory_mib;
      gpus_[g].last_t = start_;
      gpus_[g].history.push_back({start_, GpuSample{}});
      views_[g].index = g;
      views_[g].uuid = fmt::format("SIM-GPU-{}", g);
      views_[g].total_mib = server.gpu_memory_mib;
      views_[g].level = TelemetryLevel::Full;
    }
    if (o.record_timeline) timeline_.resize(server.gpus);
  }

  SimResult run() {
    for (int i = 0; i < static_cast<int>(jobs_.size()); ++i) push(jobs_[i].tj->submit_time, EvKind::Arrival, i, 0);
    while (!events_.empty()) {
      const Seconds t = events_.top().t;
      while (!events_.empty() && events_.top().t == t) {
        Event e = events_.top();
        events_.pop();
        ++n_events_;
        handle(e);
      }
      tick(t);
    }
    for (const auto& j : jobs_) {
      if (j.phase != Phase::Done && j.phase != Phase::Stopped)
        throw SimError(fmt::format("simulation stalled: job {} ({}) can never be placed: {}", j.rec.trace_index,
                                   j.rec.workload, last_blocked_.empty() ? "no reason given" : last_blocked_));
    }
    return finish();
  }

 private:
  // --- events -----------------------------------------------------------------------
  void push(Seconds t, EvKind k, int job, std::uint64_t version) {
    events_.push(Event{t, seq_++, k, job, version});
  }

  void push_wake(Seconds t) {
    if (wakes_.insert(t).second) push(t, EvKind::Wake, -1, 0);
  }

  void handle(const Event& e) {
    switch (e.kind) {
      case EvKind::Arrival: {
        Job& j = jobs_[e.job];
        j.phase = Phase::Queued;
        main_queue_.push_back({j.spec, j.recovery});
        break;
      }
      case EvKind::FirstActivity: {
        Job& j = jobs_[e.job];
        if (j.phase != Phase::Running || j.attempt != e.version) break;
        running_[j.running_pos].first_activity = e.t;
        j.rec.attempts.back().first_activity = e.t;
        const bool ramp = opt_.sim.memory_ramp_s > 0 && opt_.sim.memory_initial_fraction < 1;
        const MiB first = ramp ? static_cast<MiB>(std::ceil(static_cast<double>(j.w->peak_mib) *
                                                            opt_.sim.memory_initial_fraction))
                               : j.w->peak_mib;
        if (!allocate(j, first, e.t)) break;
        j.active = true;
        for (int g : j.gpus) gpus_[g].active.push_back(e.job);
        refresh(j.gpus, e.t);
        if (ramp) push(e.t + opt_.sim.memory_ramp_s, EvKind::RampDone, e.job, j.attempt);
        break;
      }
      case EvKind::RampDone: {
        Job& j = jobs_[e.job];
        if (j.phase != Phase::Running || j.attempt != e.version) break;
        allocate(j, j.w->peak_mib - j.held_mib, e.t);
        break;
      }
      case EvKind::Complete: {
        Job& j = jobs_[e.job];
        if (j.phase != Phase::Running || j.version != e.version) break;
        finish_attempt(e.job, e.t, AttemptOutcome::Completed);
        j.phase = Phase::Done;
        j.rec.completed = true;
        j.rec.end = e.t;
        break;
      }
      case EvKind::Wake:
        wakes_.erase(e.t);
        break;
    }
  }

  // Allocates `mib` more on every GPU of the job; the job dies of OOM if one cannot hold it.
  bool allocate(Job& j, MiB mib, Seconds t) {
    if (mib <= 0) return true;
    for (int g : j.gpus) {
      if (gpus_[g].used + mib > gpus_[g].total) {
        const int id = static_cast<int>(j.spec.id);
        Failure f;
        f.job = running_[j.running_pos];
        f.kind = FailureKind::Oom;
        f.detail = fmt::format("CUDA out of memory: tried to allocate {} MiB on gpu{} with {} MiB free", mib, g,
                               gpus_[g].total - gpus_[g].used);
        finish_attempt(id, t, AttemptOutcome::Oom);
        j.phase = Phase::Failed;
        failures_.push_back(std::move(f));
        return false;
      }
    }
    for (int g : j.gpus) {
      integrate(g, t);
      gpus_[g].used += mib;
      note(g, t);
    }
    j.held_mib += mib;
    return true;
  }

  // Ends the current attempt: frees its GPUs and memory, updates neighbours' speeds.
  void finish_attempt(int id, Seconds t, AttemptOutcome outcome) {
    Job& j = jobs_[id];
    advance(j, t);
    auto& a = j.rec.attempts.back();
    a.end = t;
    a.outcome = outcome;
    for (int g : j.gpus) {
      integrate(g, t);
      gpus_[g].used -= j.held_mib;
      erase_value(gpus_[g].running, id);
      erase_value(gpus_[g].active, id);
      note(g, t);
    }
    j.held_mib = 0;
    j.active = false;
    // Swap-remove from the running list handed to the engine.
    const int pos = j.running_pos;
    const int last = static_cast<int>(running_.size()) - 1;
    if (pos != last) {
      running_[pos] = std::move(running_[last]);
      jobs_[running_[pos].spec.id].running_pos = pos;
    }
    running_.pop_back();
    j.running_pos = -1;
    ++j.version;
    const std::vector<int> gpus = std::move(j.gpus);
    j.gpus.clear();
    refresh(gpus, t);
  }

  void launch(const Launch& l, Seconds t) {
    Job& j = jobs_[l.job];
    j.phase = Phase::Running;
    j.attempt += 1;
    j.version += 1;
    j.work_done = 0;
    j.last_update = t;
    j.speed = 1;
    j.active = false;
    j.held_mib = 0;
    j.gpus = l.gpus;
    if (j.rec.first_launch < 0) j.rec.first_launch = t;
    AttemptRecord a;
    a.launch = t;
    a.gpus = l.gpus;
    a.exclusive = l.exclusive;
    a.floor_mib = j.recovery.floor_mib;
    a.admitted_mib = l.admitted_mib;
    j.rec.attempts.push_back(a);

    RunningJob r;
    r.spec = j.spec;
    r.recovery = j.recovery;
    r.gpus = l.gpus;
    r.launched_at = t;
    r.exclusive = l.exclusive;
    r.admitted_mib = l.admitted_mib;
    r.free_at_placement = l.free_at_placement;
    r.gpu_total_mib = std::numeric_limits<MiB>::max();
    for (int g : l.gpus) {
      r.gpu_total_mib = std::min(r.gpu_total_mib, gpus_[g].total);
      gpus_[g].running.push_back(static_cast<int>(l.job));
    }
    j.running_pos = static_cast<int>(running_.size());
    running_.push_back(std::move(r));

    const Seconds work = j.work;
    push(t + work, EvKind::Complete, static_cast<int>(l.job), j.version);
    const Seconds delay = first_activity_delay(opt_.sim, opt_.seed, static_cast<std::uint64_t>(j.rec.trace_index), j.attempt);
    if (delay < work) push(t + delay, EvKind::FirstActivity, static_cast<int>(l.job), j.attempt);
  }

  // --- progress and interference ----------------------------------------------------
  void advance(Job& j, Seconds t) {
    j.work_done += j.speed * (t - j.last_update);
    j.last_update = t;
  }

  double speed_of(int id) const {
    const Job& j = jobs_[id];
    if (!j.active) return 1.0;
    double s = 1.0;
    const ActivityProfile self{j.w->util, j.w->drama};
    for (int g : j.gpus) {
      double ou = 0, od = 0;
      for (int k : gpus_[g].active) {
        if (k == id) continue;
        ou += jobs_[k].w->util;
        od += jobs_[k].w->drama;
      }
      s = std::min(s, model_.speed(self, ou, od));
    }
    return s;
  }

  // Recomputes speeds of every job on `changed` GPUs and the activity of their GPUs.
  void refresh(const std::vector<int>& changed, Seconds t) {
    touched_.clear();
    for (int g : changed) {
      touched_.push_back(g);
      for (int id : gpus_[g].running) {
        Job& j = jobs_[id];
        const double s = speed_of(id);
        for (int h : j.gpus) touched_.push_back(h);
        if (s == j.speed) continue;
        advance(j, t);
        j.speed = s;
        ++j.version;
        const double remaining = std::max(0.0, j.work - j.work_done);
        push(t + remaining / s, EvKind::Complete, id, j.version);
      }
    }
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (int g : touched_) resample(g, t);
  }

  // A GPU's activity is the speed-weighted sum of its active jobs' solo activity, capped at 1.
  void resample(int g, Seconds t) {
    GpuSample s{};
    double a = 0, o = 0, d = 0, u = 0;
    for (int id : gpus_[g].active) {
      const Job& j = jobs_[id];
      a += j.speed * j.w->smact;
      o += j.speed * j.w->smocc;
      d += j.speed * j.w->drama;
      u += j.speed * j.w->util;
    }
    s.smact = std::min(1.0, a);
    s.smocc = std::min(1.0, o);
    s.drama = std::min(1.0, d);
    s.util = std::min(1.0, u);
    Gpu& gpu = gpus_[g];
    if (s.smact == gpu.sample.smact && s.smocc == gpu.sample.smocc && s.drama == gpu.sample.drama &&
        s.util == gpu.sample.util)
      return;
    integrate(g, t);
    gpu.sample = s;
    if (!gpu.history.empty() && gpu.history.back().first == t) gpu.history.back().second = s;
    else gpu.history.push_back({t, s});
    // Keep one change point older than any window the engine can ask for.
    const Seconds keep = t - (opt_.engine.telemetry_window_samples + 2) / opt_.engine.telemetry_sample_hz;
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
    GpuPoint p{t, gpu.used, gpu.sample.smact, static_cast<int>(gpu.running.size())};
    auto& tl = timeline_[g];
    if (!tl.empty() && tl.back().t == t) tl.back() = p;
    else tl.push_back(p);
  }

  // --- the engine -------------------------------------------------------------------
  // Fills the views with telemetry windows synthesised at the sample times up to t.
  void build_views(Seconds t) {
    const double hz = opt_.engine.telemetry_sample_hz;
    const int n = opt_.engine.telemetry_window_samples;
    const auto k_now = static_cast<std::int64_t>(std::floor(t * hz + 1e-9));
    const auto k_first = static_cast<std::int64_t>(std::ceil(start_ * hz - 1e-9));
    for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
      Gpu& gpu = gpus_[g];
      gpu.window.clear();
      std::size_t h = 0;
      for (std::int64_t k = std::max(k_now - n + 1, k_first); k <= k_now; ++k) {
        const Seconds ts = static_cast<double>(k) / hz;
        while (h + 1 < gpu.history.size() && gpu.history[h + 1].first <= ts) ++h;
        GpuSample s = gpu.history[h].first <= ts ? gpu.history[h].second : GpuSample{};
        if (opt_.sim.telemetry_noise > 0) s = noisy(s, g, k);
        gpu.window.push_back(s);
      }
      GpuView& v = views_[g];
      v.free_mib = gpu.total - gpu.used;
      v.process_count = static_cast<int>(gpu.active.size());
      v.window = gpu.window;
    }
  }

  GpuSample noisy(GpuSample s, int g, std::int64_t k) const {
    auto jitter = [&](double x, std::uint64_t m) {
      if (x <= 0) return x;  // an idle GPU reads zero
      const double z = standard_normal(hash_keys(opt_.seed, 0x7e1e, static_cast<std::uint64_t>(g) * 8 + m,
                                                 static_cast<std::uint64_t>(k)),
                                       hash_keys(opt_.seed, 0x7e1f, static_cast<std::uint64_t>(g) * 8 + m,
                                                 static_cast<std::uint64_t>(k)));
      return std::clamp(x + opt_.sim.telemetry_noise * z, 0.0, 1.0);
    };
    return {jitter(s.smact, 0), jitter(s.smocc, 1), jitter(s.drama, 2), jitter(s.util, 3)};
  }

  // True if some GPU's window at t still differs from its window one sample later.
  bool windows_changing(Seconds t) const {
    if (opt_.sim.telemetry_noise > 0) return true;
    const Seconds span = opt_.engine.telemetry_window_samples / opt_.engine.telemetry_sample_hz;
    for (const auto& gpu : gpus_)
      if (gpu.history.back().first > t - span) return true;
    return false;
  }

  void tick(Seconds t) {
    if (main_queue_.empty() && recovery_queue_.empty() && failures_.empty()) return;
    ++n_ticks_;
    build_views(t);
    Snapshot s;
    s.now = t;
    s.main_queue = &main_queue_;
    s.recovery_queue = &recovery_queue_;
    s.gpus = views_;
    s.running = running_;
    s.failures = failures_;
    s.state = state_;
    Decisions d = engine_.tick(s);
    failures_.clear();
    state_ = d.state;

    for (const auto& r : d.requeues) {
      Job& j = jobs_[r.job];
      j.recovery = r.recovery;
      j.phase = Phase::Queued;
      recovery_queue_.push_back({j.spec, j.recovery});
    }
    for (const auto& st : d.stops) {
      Job& j = jobs_[st.job];
      j.phase = Phase::Stopped;
      j.rec.end = t;
      j.rec.stop_reason = st.reason;
    }
    for (const auto& l : d.launches) {
      if (!remove_queued(recovery_queue_, l.job) && !remove_queued(main_queue_, l.job))
        throw SimError(fmt::format("engine launched job {} which is not queued", l.job));
      launch(l, t);
    }
    if (d.blocked) last_blocked_ = d.blocked->reason;
    if (d.wake_at && *d.wake_at > t) push_wake(*d.wake_at);
    // A head job held back by the pressure filter may pass once the windows settle.
    if (d.blocked && d.blocked->by_pressure && engine_.uses_telemetry() && windows_changing(t)) {
      const double hz = opt_.engine.telemetry_sample_hz;
      push_wake((std::floor(t * hz + 1e-9) + 1) / hz);
    }
  }

  static bool remove_queued(JobQueue& q, JobId id) {
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->spec.id == id) {
        q.erase(it);
        return true;
      }
    }
    return false;
  }

  SimResult finish() {
    SimResult r;
    r.policy = opt_.policy_name;
    r.engine = engine_.describe();
    r.start = start_;
    r.end = start_;
    for (const auto& j : jobs_) r.end = std::max(r.end, j.rec.end);
    double mem = 0, sm = 0;
    for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
      integrate(g, r.end);
      r.energy_j += gpus_[g].energy_j;
      mem += gpus_[g].mem_integral;
      sm += gpus_[g].sm_integral;
    }
    const double span = (r.end - r.start) * static_cast<double>(gpus_.size());
    r.gpu_mem_util_mean = span > 0 ? mem / span : 0;
    r.sm_util_mean = span > 0 ? sm / span : 0;
    r.jobs.reserve(jobs_.size());
    for (auto& j : jobs_) r.jobs.push_back(std::move(j.rec));
    std::stable_sort(r.jobs.begin(), r.jobs.end(),
                     [](const JobRecord& a, const JobRecord& b) { return a.trace_index < b.trace_index; });
    r.gpu_timeline = std::move(timeline_);
    for (const auto& g : gpus_) r.gpu_total_mib.push_back(g.total);
    r.gpu_server.assign(gpus_.size(), 0);
    r.events = n_events_;
    r.ticks = n_ticks_;
    return r;
  }

  const SimOptions& opt_;
  Engine engine_;
  InterferenceModel model_;
  std::vector<Job> jobs_;
  std::vector<Gpu> gpus_;
  std::vector<GpuView> views_;
  std::vector<RunningJob> running_;
  std::vector<Failure> failures_;
  JobQueue main_queue_, recovery_queue_;
  EngineState state_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::set<Seconds> wakes_;
  std::vector<int> touched_;
  std::vector<std::vector<GpuPoint>> timeline_;
  std::string last_blocked_;
  Seconds start_ = 0;
  std::uint64_t seq_ = 0, n_events_ = 0, n_ticks_ = 0;
};

}  // namespace

ClusterSpec ClusterSpec::uniform(int servers, int gpus_per_server, MiB gpu_memory_mib) {
  ClusterSpec c;
  c.servers.assign(static_cast<std::size_t>(std::max(servers, 0)), ServerSpec{gpus_per_server, gpu_memory_mib});
  return c;
}

int ClusterSpec::total_gpus() const {
  int n = 0;
  for (const auto& s : servers) n += s.gpus;
  return n;
}

int ClusterSpec::max_gpus_per_server() const {
  int n = 0;
  for (const auto& s : servers) n = std::max(n, s.gpus);
  return n;
}

SimResult simulate(const WorkloadCatalog& catalog, const Trace& trace, const SimOptions& options) {
  Run run(catalog, trace, options);
  SimResult r = run.run();
  r.trace = trace.name;
  return r;
}

}  // namespace aegis
