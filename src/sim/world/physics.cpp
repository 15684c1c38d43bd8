#include "sim/world/physics.h"

#include <algorithm>
#include <cmath>

#include "core/busy_union.h"

namespace aegis::simrun {

// speed_of and resample are inlined into refresh, their one caller (out of line they cost
// about 1 % more instructions under aegis; bench/bench_speed.py --instructions).

JobPhysics::JobPhysics(ClusterState& st, Recorder& rec, const SimOptions& opt)
    : st_(st),
      rec_(rec),
      opt_(opt),
      model_{opt.sim.interference_util_coeff, opt.sim.interference_dram_coeff,
             opt.sim.interference_saturation_coeff},
      first_activity_delay_(opt.sim),
      union_util_(opt.sim.util_combination == "union"),
      mps_(opt.sim.sharing == "mps"),
      history_span_((opt.engine.telemetry_window_samples + 2) / opt.engine.telemetry_sample_hz) {}

void JobPhysics::launch(const QueuedJob& job, const Placement& placement, Seconds t) {
  const int id = static_cast<int>(job.spec.id);
  Job& j = st_.jobs[id];
  j.attempt += 1;
  j.version += 1;
  // Resumed from a checkpoint (issue 32 item 1): what it saved is done (0 unless preempted).
  j.live->work -= j.live->saved_work;
  j.live->saved_work = 0;
  j.live->work_done = 0;
  j.live->last_update = t;
  j.live->speed = 1;
  j.live->active = false;
  j.live->anchored = false;
  j.live->held_mib = 0;
  j.live->gpus.clear();
  j.live->parts.clear();
  j.live->mps_limit.reset();  // set after the lifecycle's pass, from its start
  JobRecord& r = rec_.of(j);
  if (r.first_launch < 0) r.first_launch = t;
  AttemptRecord a;
  a.launch = t;
  a.floor_mib = job.recovery.floor_mib;
  for (const auto& part : placement.parts) {
    const int s = part.server;
    const Launch& l = part.launch;
    Server& srv = st_.servers[s];
    for (int local : l.gpus) {
      const int g = srv.first_gpu + local;
      if (st_.gpus[g].running.empty() && srv.idle_gpus-- == srv.ngpus) st_.whole_idle_gpus -= srv.ngpus;
      st_.gpus[g].running.push_back(id);
      st_.gpus[g].last_launched = id;
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
    st_.changed.push_back(s);
  }
  a.gpus.assign(j.live->gpus.begin(), j.live->gpus.end());
  r.attempts.push_back(std::move(a));

  j.live->ends_at = t + j.live->work;
  st_.events.push(j.live->ends_at, EvKind::Complete, id, j.version);
  const Seconds delay = first_activity_delay_(opt_.seed, static_cast<std::uint64_t>(r.trace_index), j.attempt);
  if (delay < j.live->work) st_.events.push(t + delay, EvKind::FirstActivity, id, j.attempt);
}

void JobPhysics::first_activity(int id, Seconds t) {
  Job& j = st_.jobs[id];
  for (const auto& p : j.live->parts) {
    Server& srv = st_.servers[p.server];
    srv.placer.set_first_activity(static_cast<std::size_t>(p.running_pos), t);
    for (int local : srv.placer.running[static_cast<std::size_t>(p.running_pos)].gpus)
      srv.stale_room(local);  // its gates move
  }
  rec_.of(j).attempts.back().first_activity = t;
}

bool JobPhysics::begin_activity(int id, Seconds t) {
  Job& j = st_.jobs[id];
  const bool ramp = opt_.sim.memory_ramp_s > 0 && opt_.sim.memory_initial_fraction < 1;
  const MiB first = ramp ? static_cast<MiB>(std::ceil(static_cast<double>(j.w->peak_mib) *
                                                      opt_.sim.memory_initial_fraction))
                         : j.w->peak_mib;
  if (!allocate(j, first, t)) return false;
  j.live->active = true;
  j.live->level = j.w->phases.at(0);  // start-up levels, then steady ones (sim/models/phases.h)
  if (j.live->level != j.w->phases.steady)
    st_.events.push(t + j.w->phases.startup_s, EvKind::SteadyPhase, id, j.attempt);
  for (int g : j.live->gpus) {
    st_.gpus[g].active.push_back(id);
    sum_activity(g);
  }
  refresh(j.live->gpus, t);
  if (ramp) st_.events.push(t + opt_.sim.memory_ramp_s, EvKind::RampDone, id, j.attempt);
  return true;
}

void JobPhysics::steady_phase(int id, Seconds t) {
  Job& j = st_.jobs[id];
  j.live->level = j.w->phases.steady;
  for (int g : j.live->gpus) sum_activity(g);
  refresh(j.live->gpus, t);
}

bool JobPhysics::ramp_done(int id, Seconds t) {
  Job& j = st_.jobs[id];
  // Less free memory never turns a refusal into a placement (the stages declare it:
  // Engine::refusals_monotone), so the servers' earlier refusals stand: no bump here.
  return allocate(j, j.w->peak_mib - j.live->held_mib, t);
}

bool JobPhysics::complete(int id, Seconds t) {
  Job& j = st_.jobs[id];
  // A job slowed down after this event was set keeps it (fewer heap entries) and
  // is rescheduled here for the work it still has.
  // (Work left that the clock cannot resolve any more counts as done.)
  advance(j, t);
  const double left = j.live->work - j.live->work_done;
  if (left > 1e-9 * std::max(1.0, j.live->work) && t + left / j.live->speed > t) {
    j.live->ends_at = t + left / j.live->speed;
    st_.events.push(j.live->ends_at, EvKind::Complete, id, j.version);
    return false;
  }
  finish_attempt(id, t, SimOutcome::Completed);
  JobRecord& r = rec_.of(j);
  r.completed = true;
  r.end = t;
  return true;
}

// Allocates `mib` more on every GPU of the job; the job dies of OOM if one cannot hold it.
bool JobPhysics::allocate(Job& j, MiB mib, Seconds t) {
  if (mib <= 0) return true;
  const int id = static_cast<int>(&j - st_.jobs.data());
  // Under MPS with limits (the limit is the lifecycle's, lifecycle/mps_limit.h; none
  // when placed exclusive), a job that outgrows it fails at its own limit, whatever the
  // GPU has left.
  for (int g : j.live->gpus) {
    const bool over_limit = j.live->mps_limit && j.live->held_mib + mib > *j.live->mps_limit;
    if (over_limit || st_.gpus[g].used + mib > st_.gpus[g].total) {
      auto& a = rec_.of(j).attempts.back();
      a.mps_limit = over_limit;
      a.neighbour_oom = !over_limit && st_.gpus[g].last_launched != id;
      // No log line: the record says which limit it met (above), and nothing of the
      // simulator reads an attempt's detail (formatting one cost ~900 instructions an OOM).
      finish_attempt(id, t, SimOutcome::Oom);
      return false;
    }
  }
  for (int g : j.live->gpus) {
    integrate(g, t);
    Gpu& gpu = st_.gpus[g];
    gpu.used += mib;
    Server& srv = st_.servers[gpu.server];
    srv.placer.views[gpu.local].free_mib = gpu.total - gpu.used;
    srv.free_mib -= mib;
    srv.stale_room(gpu.local);
    note(g, t);
  }
  j.live->held_mib += mib;
  return true;
}

// Ends the current attempt: frees its GPUs and memory, updates neighbours' speeds.
double JobPhysics::preempt(int id, Seconds t) {
  finish_attempt(id, t, SimOutcome::Preempted);  // (its work advanced to t)
  const Live& l = *st_.jobs[id].live;
  return std::max(0.0, l.work_done - l.saved_work);
}

void JobPhysics::finish_attempt(int id, Seconds t, SimOutcome outcome) {
  Job& j = st_.jobs[id];
  const bool was_active = j.live->active;
  advance(j, t);
  auto& a = rec_.of(j).attempts.back();
  a.end = t;
  a.outcome = outcome;
  for (int g : j.live->gpus) {
    Gpu& gpu = st_.gpus[g];
    integrate(g, t);
    gpu.used -= j.live->held_mib;
    erase_value(gpu.running, id);
    erase_value(gpu.active, id);
    sum_activity(g);
    Server& srv = st_.servers[gpu.server];
    GpuView& v = srv.placer.views[gpu.local];
    srv.free_mib += (gpu.total - gpu.used) - v.free_mib;
    v.free_mib = gpu.total - gpu.used;
    v.process_count = static_cast<int>(gpu.active.size());
    srv.stale_room(gpu.local);  // its memory, processes and loads change
    if (gpu.running.empty() && ++srv.idle_gpus == srv.ngpus) st_.whole_idle_gpus += srv.ngpus;
    note(g, t);
  }
  for (const auto& p : j.live->parts) {
    st_.bump(p.server);
    Server& srv = st_.servers[p.server];
    // Swap-remove from the running list handed to the engine.
    if (srv.placer.remove(static_cast<std::size_t>(p.running_pos))) {
      const RunningJob& moved = srv.placer.running[static_cast<std::size_t>(p.running_pos)];
      for (auto& q : st_.jobs[moved.spec.id].live->parts)
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

// Recomputed from scratch (not adjusted) so that sums never drift with history.
inline void JobPhysics::sum_activity(int g) {
  Gpu& gpu = st_.gpus[g];
  gpu.active_util = gpu.active_drama = gpu.active_smact = 0;
  for (int k : gpu.active) {
    const ActivityLevels& l = st_.jobs[k].live->level;  // the levels of its phase
    gpu.active_util += l.util;
    gpu.active_drama += l.drama;
    gpu.active_smact += l.smact;
  }
}

// A job's speed on each of its GPUs is that of its device (a MIG instance has a share
// of the SMs) times what its neighbours leave it (time slicing or MPS); the job runs at
// its slowest GPU (docs/sharing.md).
[[gnu::always_inline]] inline double JobPhysics::speed_of(int id) const {
  const Job& j = st_.jobs[id];
  if (!j.live->active) return 1.0;
  double s = 1.0;
  const ActivityProfile self{j.live->level.util, j.live->level.drama};
  for (int g : j.live->gpus) {
    const Gpu& gpu = st_.gpus[g];
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

// Recomputes speeds of every job on `changed` GPUs and the activity of their GPUs.
void JobPhysics::refresh(std::span<const int> changed, Seconds t) {
  touched_.clear();
  ++stamp_;
  for (int g : changed) {
    touch(g);
    for (int id : st_.gpus[g].running) {
      Job& j = st_.jobs[id];
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
        st_.events.push(ends, EvKind::Complete, id, j.version);
      }
    }
  }
  // Resampled in GPU order: deterministic (one GPU, as most refreshes touch, is in order).
  if (touched_.size() > 1) std::sort(touched_.begin(), touched_.end());
  st_.n_visits += touched_.size();
  for (int g : touched_) resample(g, t);
}

// A GPU's activity is the speed-weighted sum of its active jobs' solo activity, capped at
// 1; its coarse utilisation by sim.util_combination (the union of busy periods by default).
[[gnu::always_inline]] inline void JobPhysics::resample(int g, Seconds t) {
  double a = 0, o = 0, d = 0, u = 0, idle = 1;
  for (int id : st_.gpus[g].active) {
    const Job& j = st_.jobs[id];
    const ActivityLevels& l = j.live->level;  // the levels of its phase
    a += j.live->speed * l.smact;
    o += j.live->speed * l.smocc;
    d += j.live->speed * l.drama;
    u += j.live->speed * l.util;
    idle = idle_after(idle, j.live->speed * l.util);
  }
  const double util = union_util_ ? 1.0 - idle : std::min(1.0, u);
  const GpuSample s{std::min(1.0, a), std::min(1.0, o), std::min(1.0, d), util};
  Gpu& gpu = st_.gpus[g];
  Server& srv = st_.servers[gpu.server];
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
  if (eased) st_.bump(gpu.server);
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

}  // namespace aegis::simrun
