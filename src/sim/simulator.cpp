// simulate(): builds the cluster, then runs the clock. Run only wires the parts and tells
// the lifecycle what happened; each concern lives in its own files (docs/simulator.md,
// "Structure"): world/ (events, job physics, telemetry), dispatch/ (the placer), results/.
#include "sim/simulator.h"

#include <algorithm>
#include <csignal>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <unordered_map>

#include "lifecycle/lifecycle.h"
#include "sched/engine.h"
#include "sim/csv.h"
#include "sim/dispatch/dispatcher.h"
#include "sim/results/recorder.h"
#include "sim/sim_estimates.h"
#include "sim/world/physics.h"
#include "sim/world/state.h"
#include "sim/world/telemetry.h"

namespace aegis {

namespace {

using namespace simrun;

// The policy's engine, told whether the MPS rules apply (--sharing).
EngineConfig engine_config(const SimOptions& o) {
  EngineConfig c = o.engine;
  c.mps = o.sim.sharing == "mps";
  return c;
}

LifecycleOptions lifecycle_options(const SimOptions& o, const Trace& trace) {
  LifecycleOptions l;
  // Fair share (issue 32 item 2): weights name the trace's users and groups; with a user
  // column each user's charged GPU share is reported (docs/lab-policies.md).
  auto index_of = [](const std::vector<std::string>& names, std::string_view name) -> std::optional<std::int64_t> {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return static_cast<std::int64_t>(i);
    return std::nullopt;
  };
  l.share_weights = resolve_share_weights(o.engine, [&](std::string_view name, bool group) {
    return index_of(group ? trace.group_names : trace.user_names, name);
  });
  l.track_usage = !trace.user_names.empty();
  l.report_changes = false;  // no store: the jobs that finished are all it needs
  l.start_placements = false;  // its dispatcher hears of each start directly
  l.mps_limits = o.sim.sharing == "mps" && o.sim.mps_memory_limits;
  l.preemption = o.sim.preemption;  // issue 32 item 1, as aegisd's `preemption`
  return l;
}

// Solo-seconds of work of a job: its own duration, or its workload's.
Seconds work_of(const TraceJob& tj, const WorkloadProfile& w) { return tj.duration_s.value_or(w.solo_runtime_s); }

class Run {
 public:
  Run(const WorkloadCatalog& cat, const Trace& trace, const SimOptions& o)
      : opt_(o),
        trace_jobs_(trace.jobs),
        links_(trace.links.empty() ? nullptr : &trace.links),
        user_names_(trace.user_names),
        engine_(engine_config(o)),
        life_(engine_config(o), lifecycle_options(o, trace)),
        rec_(trace.jobs.size(), o.cluster.total_gpus(), o.record_timeline),
        physics_(st_, rec_, o),
        windows_(st_, o) {
    validate(o.sim);
    if (o.cluster.servers.empty()) throw InputError("cluster: needs at least one server");
    for (const auto& s : o.cluster.servers) {
      if (s.gpus < 1 && s.devices.empty()) throw InputError("--gpus-per-server: a server needs at least one GPU");
      if (s.gpu_memory_mib < 1) throw InputError("--gpu-memory: must be positive");
    }
    const int total = o.cluster.total_gpus();
    // Issue 32: job ids of trace indices, for arrays and dependencies (only when a trace has them).
    if (links_) {
      for (std::size_t i = 0; i < trace.jobs.size(); ++i) id_of_index_[trace.jobs[i].index] = static_cast<JobId>(i);
      life_.expect_links();  // it forgets each job as it ends; its dependents may come later
    }
    st_.jobs.reserve(trace.jobs.size());
    // Each job's record is put at once where the result wants it, in trace-index order:
    // the result then moves no record (a million of them, in a random order of places).
    const std::vector<std::uint32_t> slot_of = record_slots(trace.jobs);
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
      j.slot = slot_of[st_.jobs.size()];
      JobRecord& r = rec_.record(j.slot);
      r.trace_index = tj.index;
      r.workload = tj.workload;
      r.num_gpus = tj.num_gpus;
      r.submit = tj.submit_time;
      r.solo_runtime = work_of(tj, *j.w);
      st_.jobs.push_back(std::move(j));
    }
    st_.start = trace.jobs.empty() ? 0 : trace.jobs.front().submit_time;
    build_servers();
    if (engine_.uses_telemetry()) windows_.attach();
    std::vector<DeviceInfo> devices;
    for (const auto& gpu : st_.gpus) devices.push_back({gpu.total, false, o.sim.gpu_driver_reserved_mib, 0, 0});
    dispatcher_.emplace(st_, engine_, o, windows_, physics_, devices);
  }

  SimResult run() {
    // Arrivals are taken from the jobs in submit order instead of the event queue (which
    // stays small): at equal times they come first, as if pushed before every other event.
    std::vector<std::uint32_t> arrivals(st_.jobs.size());
    for (std::uint32_t i = 0; i < arrivals.size(); ++i) arrivals[i] = i;
    const auto arrives_first = [&](std::uint32_t a, std::uint32_t b) {
      return trace_jobs_[a].submit_time < trace_jobs_[b].submit_time;
    };
    // Loaded traces come in submit order already (a stable sort would still merge).
    if (!std::is_sorted(arrivals.begin(), arrivals.end(), arrives_first))
      std::stable_sort(arrivals.begin(), arrivals.end(), arrives_first);
    std::size_t next_arrival = 0;
    while (next_arrival < arrivals.size() || !st_.events.empty()) {
      Seconds t = st_.events.next_time();
      if (next_arrival < arrivals.size()) t = std::min(t, trace_jobs_[arrivals[next_arrival]].submit_time);
      while (next_arrival < arrivals.size() && trace_jobs_[arrivals[next_arrival]].submit_time == t) {
        ++st_.n_events;
        arrive(static_cast<int>(arrivals[next_arrival++]), t);
      }
      st_.events.drain(t, [this](const Event& e) { handle(e); }, st_.n_events);
      tick(t);
      if (opt_.progress && (st_.n_events & 0xffff) == 0)
        opt_.progress(static_cast<double>(n_finished_) / static_cast<double>(std::max<std::size_t>(1, st_.jobs.size())));
    }
    for (const auto& j : st_.jobs) {
      if (j.live)  // every job has arrived: one still alive never completed nor stopped
        throw SimError(fmt::format("simulation stalled: job {} ({}) can never be placed{}", rec_.of(j).trace_index,
                                   rec_.of(j).workload,
                                   dispatcher_->last_gang_blocked() == 0
                                       ? std::string()
                                       : fmt::format(": needs {} whole idle servers' worth of GPUs",
                                                     dispatcher_->last_gang_blocked())));
    }
    const Seconds end = rec_.end(st_.start);
    physics_.integrate_all(end);
    SimResult r = rec_.finish(st_, end, opt_.policy_name, engine_.describe());
    // Each user's charged GPU-seconds (booked share of a GPU x time), the lifecycle's own.
    for (std::int64_t u : life_.fair_share().users())
      if (u >= 0 && static_cast<std::size_t>(u) < user_names_.size())
        r.user_gpu_seconds.emplace_back(user_names_[static_cast<std::size_t>(u)], life_.fair_share().charged(u, end));
    r.reservations = std::move(reservations_);
    r.lab.preemption = opt_.sim.preemption;  // issue 32 item 1
    r.lab.preemptions = life_.preemptions();
    r.lab.work_lost_gpu_s = work_lost_gpu_s_;
    if (r.lab.preemption)  // records are in trace order, as trace_jobs_
      for (std::size_t k = 0; k < r.jobs.size(); ++k)
        for (const auto& a : r.jobs[k].attempts)
          if (a.outcome == SimOutcome::Preempted) ++r.lab.preempted_by_level[trace_jobs_[k].priority];
    if ((r.lab.backfill = opt_.engine.backfill)) count_late_heads(r);
    return r;
  }

 private:
  // The GPUs and servers of the cluster, each server's engine view filled.
  void build_servers() {
    const ClusterSpec& cluster = opt_.cluster;
    st_.gpus.resize(static_cast<std::size_t>(cluster.total_gpus()));
    if (cluster.servers.size() > (std::size_t{1} << Candidate::kServerBits))
      throw InputError(fmt::format("cluster: {} servers; at most {} can be simulated", cluster.servers.size(),
                                   std::size_t{1} << Candidate::kServerBits));
    st_.servers.reserve(cluster.servers.size());
    for (std::size_t s = 0; s < cluster.servers.size(); ++s) st_.servers.emplace_back(engine_);
    int next = 0;
    for (std::size_t s = 0; s < st_.servers.size(); ++s) {
      const ServerSpec spec = cluster.servers[s];
      const int n = spec.devices.empty() ? spec.gpus : static_cast<int>(spec.devices.size());
      Server& srv = st_.servers[s];
      srv.first_gpu = next;
      srv.ngpus = n;
      srv.idle_gpus = n;
      st_.whole_idle_gpus += n;
      srv.placer.views.resize(static_cast<std::size_t>(n));
      srv.placer.keep_loads();
      for (int g = 0; g < n; ++g, ++next) {
        Gpu& gpu = st_.gpus[static_cast<std::size_t>(next)];
        gpu.server = static_cast<int>(s);
        gpu.local = g;
        gpu.total = spec.devices.empty() ? spec.gpu_memory_mib : spec.devices[g].memory_mib;
        gpu.sm_fraction = spec.devices.empty() ? 1.0 : spec.devices[g].sm_fraction;
        // The driver's own share, in use from the start and never freed (sim.gpu_driver_reserved_mib).
        gpu.used = opt_.sim.gpu_driver_reserved_mib;
        if (gpu.used >= gpu.total)
          throw InputError(fmt::format("sim.gpu_driver_reserved_mib: {} MiB leaves nothing of server {}'s {} MiB device",
                                       gpu.used, s, gpu.total));
        gpu.last_t = st_.start;
        gpu.history.push_back({st_.start, GpuSample{}});
        GpuView& v = srv.placer.views[static_cast<std::size_t>(g)];
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
  }

  void arrive(int id, Seconds t) {
    Job& j = st_.jobs[static_cast<std::size_t>(id)];
    const TraceJob& tj = trace_jobs_[static_cast<std::size_t>(id)];
    j.live = std::make_unique<Live>();
    j.live->work = work_of(tj, *j.w);
    // (spec.name stays empty: no stage reads it, and the record keeps the workload.)
    JobSpec spec;
    spec.id = id;
    spec.num_gpus = tj.num_gpus;
    spec.submit_time = tj.submit_time;
    spec.owner = tj.owner;
    spec.group = tj.group;
    spec.estimates = j.w->estimates;
    spec.hints = j.w->hints;
    spec.predicted_util = j.w->predicted_util;
    // Issue 32 item 5: the trace's limit, else sim.time_limit_factor times its solo runtime.
    if (tj.time_limit_s > 0) spec.time_limit = static_cast<Seconds>(tj.time_limit_s);
    else if (opt_.sim.time_limit_factor > 0) spec.time_limit = opt_.sim.time_limit_factor * work_of(tj, *j.w);
    // Issue 32 item 1: its trace priority level; with preemption every job asks for a
    // checkpoint signal (sim.checkpoint_lead_s), as `--checkpoint-signal USR1@LEAD` would.
    spec.priority = tj.priority;
    if (opt_.sim.preemption && opt_.sim.checkpoint_lead_s > 0) {
      spec.checkpoint_signal = SIGUSR1;
      spec.checkpoint_lead_s = opt_.sim.checkpoint_lead_s;
    }
    estimates_.submitted(spec, *j.w);  // the history of its signature, as aegisd's chain has it
    if (links_) {  // issue 32: its array and dependencies (trace columns), as aegisd gives them
      if (auto l = links_->find(tj.index); l != links_->end()) {
        const JobLinks links = links_of(l->second, spec);  // (sets its array fields first)
        life_.submitted(std::move(spec), false, false, t, links);
        st_.dirty = true;
        return;
      }
    }
    life_.submitted(std::move(spec), false, false, t);
    st_.dirty = true;
  }

  // Issue 32: the lifecycle's links of a trace job (ids of trace indices; an index not in the
  // trace names no job, and a dependency on it can never be met).
  JobLinks links_of(const TraceLinks& l, JobSpec& spec) const {
    auto id_of = [&](std::int64_t index) {
      auto it = id_of_index_.find(index);
      return it == id_of_index_.end() ? std::numeric_limits<JobId>::max() : it->second;
    };
    if (l.array) {
      spec.array_id = id_of(*l.array);
      spec.array_index = l.array_index;
    }
    JobLinks out;
    out.array_limit = l.array_limit;
    for (const auto& [index, kind] : l.after) out.after.push_back({id_of(index), *parse_after_kind(kind)});
    return out;
  }

  // The job's activity began (its observation window starts): its servers, the lifecycle
  // and the dispatcher hear of it.
  void anchor(int id, Seconds t) {
    const Job& j = st_.jobs[static_cast<std::size_t>(id)];
    j.live->anchored = true;
    physics_.first_activity(id, t);
    life_.first_activity(id, t);
    // Issue 32: an array's probe learns its peak from its memory: here its true peak, at its
    // first activity (aegisd reads what NVML shows, from then on). Nothing else may happen
    // before its peak is reached: a pass then releases its elements (without this wake they
    // waited for the next arrival or end, minutes to hours).
    if (links_)
      if (auto due = life_.memory_seen(id, j.w->peak_mib, t)) st_.push_wake(0, *due);
    dispatcher_->activity_began(j, t);
  }

  // An event of the world: the physics applies it; the lifecycle hears of what happened.
  void handle(const Event& e) {
    const Seconds t = e.t;
    switch (e.kind()) {
      case EvKind::Arrival:  // arrivals come from the trace, not the queue (run())
        break;
      case EvKind::FirstActivity: {
        const Job& j = st_.jobs[static_cast<std::size_t>(e.id)];
        if (!j.on_gpus() || j.attempt != e.version) break;
        // Its observation window starts with its sustained activity, as aegisd's anchor
        // finds it: now, or when a start-up under the anchor's threshold is over.
        if (j.w->phases.anchored_at_first_activity(opt_.engine.anchor_process_util)) anchor(e.id, t);
        if (!physics_.begin_activity(e.id, t)) oom(e.id, t);
        break;
      }
      case EvKind::RampDone: {
        const Job& j = st_.jobs[static_cast<std::size_t>(e.id)];
        if (!j.on_gpus() || j.attempt != e.version) break;
        if (!physics_.ramp_done(e.id, t)) oom(e.id, t);
        break;
      }
      case EvKind::Complete: {
        Job& j = st_.jobs[static_cast<std::size_t>(e.id)];
        if (!j.on_gpus() || j.version != e.version) break;
        if (!physics_.complete(e.id, t)) break;  // slowed since: rescheduled
        life_.ended(e.id, {aegis::AttemptOutcome::Completed, ""}, t, fx_);
        estimates_.completed(e.id, life_, t);  // the chain learns its peak (and duration)
        life_.forget(e.id);  // its record is the simulator's; the lifecycle keeps live jobs only
        j.live.reset();
        ++n_finished_;
        break;
      }
      case EvKind::SteadyPhase: {  // the attempt's start-up is over
        const Job& j = st_.jobs[static_cast<std::size_t>(e.id)];
        if (!j.on_gpus() || j.attempt != e.version || !j.live->active) break;
        physics_.steady_phase(e.id, t);
        if (!j.live->anchored) anchor(e.id, t);
        break;
      }
      case EvKind::Wake:
        erase_value(st_.servers[static_cast<std::size_t>(e.id)].wakes, t);
        st_.bump(e.id);
        break;
      case EvKind::Timeout: {  // issue 32 item 5: the lifecycle stops what passed its limit
        const Job& j = st_.jobs[static_cast<std::size_t>(e.id)];
        if (!j.on_gpus() || j.attempt != e.version) break;
        for (JobId id : life_.expire(t).signals) time_out(static_cast<int>(id), t);
        break;
      }
      case EvKind::CheckpointDue:  // issue 32 item 1: a periodic checkpoint, then the next
      case EvKind::CheckpointSaved: {  // a warned job's checkpoint
        const Job& j = st_.jobs[static_cast<std::size_t>(e.id)];
        if (!j.on_gpus() || j.attempt != e.version) break;
        if (e.kind() == EvKind::CheckpointDue)
          st_.events.push(t + opt_.sim.checkpoint_interval_s, EvKind::CheckpointDue, e.id, e.version);
        physics_.checkpoint(e.id, t);
        // The lifecycle hears of it: a job being preempted is stopped now.
        for (JobId id : life_.checkpointed(e.id, t).signals) preempt_stop(static_cast<int>(id), t);
        break;
      }
    }
  }

  // Issue 32 item 1: job id's attempt is stopped for a preemption. It loses its work since
  // its last checkpoint, and the lifecycle requeues it; its next attempt resumes from that
  // checkpoint (JobPhysics::launch).
  void preempt_stop(int id, Seconds t) {
    Job& j = st_.jobs[static_cast<std::size_t>(id)];
    if (!j.on_gpus()) return;
    work_lost_gpu_s_ += physics_.preempt(id, t) * static_cast<double>(rec_.of(j).num_gpus);
    life_.ended(id, {aegis::AttemptOutcome::Cancelled, "stopped for a preemption"}, t, stop_fx_);
  }

  // Job id's attempt was stopped at its time limit: it ends, failed ("timeout").
  void time_out(int id, Seconds t) {
    Job& j = st_.jobs[static_cast<std::size_t>(id)];
    physics_.stop(id, t);
    life_.ended(id, {aegis::AttemptOutcome::Failed, "stopped at its time limit"}, t, fx_);
    JobRecord& r = rec_.of(j);
    r.end = t;
    r.stop_reason = life_.find(id)->reason;
    life_.forget(id);
    j.live.reset();
    ++n_finished_;
  }

  // Job id's attempt died of OOM (the physics ended it and recorded which limit it met).
  void oom(int id, Seconds t) { life_.ended(id, {aegis::AttemptOutcome::Oom, ""}, t, fx_); }

  // Failures through the recovery rule, then the queues head first: the lifecycle's pass,
  // with the dispatcher as its placer; the simulator only keeps its records.
  void tick(Seconds t) {
    // Issue 32 item 1: a pass that stopped running jobs (a preemption) freed their GPUs for
    // the job they were stopped for: the lifecycle is asked again at once.
    while (pass(t)) {
    }
    if (opt_.record_timeline) rec_.note_queue(static_cast<int>(life_.queued_count()), t);
  }

  // One lifecycle pass, its effects applied; true if it stopped a running job.
  bool pass(Seconds t) {
    bool stopped = false;
    // With no job new to the queue and no server changed since the last pass, that pass's
    // answers stand (refusals stand until a server changes; time opens gates only through
    // wakes, which change their server), so the pass is skipped. Without the refusal
    // caches nothing is assumed. (A backfill decline is no refusal: a start after it in
    // the same pass leaves the next pass due, ClusterDispatcher::started.)
    if (life_.has_work() && (st_.dirty || !dispatcher_->caches())) {
      st_.dirty = false;
      Effects& fx = fx_;
      life_.schedule(t, *dispatcher_, fx);
      dispatcher_->pass_over();
      if (fx.reserved_start) {  // issue 32 item 5
        const auto head = static_cast<std::int64_t>(life_.queue_order().front());
        if (opt_.record_reservations) reservations_.push_back({head, *fx.reserved_start, t});
        first_reserved_.try_emplace(head, *fx.reserved_start);
      }
      for (const auto& s : fx.starts) {
        st_.jobs[s.job].live->mps_limit = s.mps_limit_mib;
        if (s.backfilled) rec_.of(st_.jobs[s.job]).attempts.back().backfilled = true;
        // Issue 32 item 5: its time limit, as an event of this attempt.
        if (const auto& lim = life_.find(s.job)->spec().time_limit)
          st_.events.push(t + *lim, EvKind::Timeout, static_cast<int>(s.job), st_.jobs[s.job].attempt);
        // Backfill: once it outruns its predicted duration the reservations counted from it
        // move (lifecycle/backfill.h expected_end): a pass then, as nothing else may happen.
        if (const auto& spec = life_.find(s.job)->spec(); opt_.engine.backfill && spec.predicted_duration &&
                                                          (!spec.time_limit || *spec.predicted_duration < *spec.time_limit))
          st_.push_wake(0, t + *spec.predicted_duration);
        // Issue 32 item 1: its periodic checkpoints.
        if (opt_.sim.preemption && opt_.sim.checkpoint_interval_s > 0)
          st_.events.push(t + opt_.sim.checkpoint_interval_s, EvKind::CheckpointDue, static_cast<int>(s.job),
                          st_.jobs[s.job].attempt);
      }
      // A job requeued after an OOM is queued again in the lifecycle (its attempt's parts
      // are gone: on_gpus() is false) until its next launch.
      // A probe's peak or a dependency: ask again then (issue 32; the placer's own gates
      // wake their servers).
      if (links_ && fx.wake_at) st_.push_wake(0, *fx.wake_at);
      // Backfill (item 5): a join the slowdown declined becomes allowed then, with no event.
      for (const auto& [server, at] : fx.join_turns)
        if (at > t) st_.push_wake(server, at);
      // Issue 32 item 1: a preemption's warnings (each warned job saves its checkpoint
      // sim.checkpoint_save_s later, if its lead allows), the end of their lead times
      // (fx.wake_at), and the jobs to stop now.
      if (opt_.sim.preemption) {
        for (const auto& w : fx.warnings)
          if (opt_.sim.checkpoint_save_s <= opt_.sim.checkpoint_lead_s)
            st_.events.push(t + opt_.sim.checkpoint_save_s, EvKind::CheckpointSaved, static_cast<int>(w.job),
                            st_.jobs[w.job].attempt);
        if (!links_ && fx.wake_at && *fx.wake_at > t) st_.push_wake(0, *fx.wake_at);
        stops_.assign(fx.signals.begin(), fx.signals.end());
      }
      for (JobId id : fx.finished) {
        const LifeJob* lj = life_.find(id);
        // Completions are recorded as they happen; failures and (issue 32: a dependency
        // that can no longer be met) cancellations here.
        if (lj->state == JobState::Completed) continue;
        Job& j = st_.jobs[id];
        JobRecord& r = rec_.of(j);
        r.end = t;
        r.stop_reason = lj->reason;
        life_.forget(id);
        j.live.reset();
        ++n_finished_;
      }
      for (JobId id : stops_) preempt_stop(static_cast<int>(id), t);  // (fx_ is read: ended() may reuse it)
      stopped = !stops_.empty();
      stops_.clear();
    }
    return stopped;
  }

  const SimOptions& opt_;
  const std::vector<TraceJob>& trace_jobs_;  // job id = position here
  const std::map<std::int64_t, TraceLinks>* links_;  // issue 32: null when the trace has none
  std::unordered_map<std::int64_t, JobId> id_of_index_;
  const std::vector<std::string>& user_names_;  // the trace's users (owner n: [n])
  Engine engine_;
  Lifecycle life_;
  ClusterState st_;
  Recorder rec_;
  JobPhysics physics_;
  TelemetryWindows windows_;
  std::optional<ClusterDispatcher> dispatcher_;  // made once the servers are
  Effects fx_;  // the lifecycle's answers, kept for their lists' storage (read at once)
  Effects stop_fx_;  // a preempted job's end (issue 32 item 1)
  std::vector<JobId> stops_;  // a pass's jobs to stop (issue 32 item 1)
  double work_lost_gpu_s_ = 0;
  SimEstimates estimates_{opt_.engine};  // the estimate chain, fed as aegisd feeds it
  std::size_t n_finished_ = 0;
  std::vector<SimResult::Reservation> reservations_;  // SimOptions::record_reservations
  std::unordered_map<std::int64_t, Seconds> first_reserved_;     // backfill: each head's first reservation

  // SimResult's late heads: started more than a second (a pass) after their first
  // reservation; and each head's first reservation in its record.
  void count_late_heads(SimResult& res) const {
    LabCounts& r = res.lab;
    double sum = 0;
    res.head_reserved.assign(res.jobs.size(), -1);
    for (const auto& [job, at] : first_reserved_) {
      ++r.reserved_heads;
      // (Records are in trace-index order, ids in submit order: the job's slot says where.)
      const std::size_t slot = st_.jobs[static_cast<std::size_t>(job)].slot;
      res.head_reserved[slot] = at;
      const Seconds started = res.jobs[slot].first_launch;
      if (started < 0 || started <= at + 1) continue;
      ++r.late_heads;
      sum += started - at;
      r.late_max_s = std::max(r.late_max_s, started - at);
    }
    r.late_mean_s = r.late_heads > 0 ? sum / static_cast<double>(r.late_heads) : 0;
  }
};

}  // namespace

SimResult simulate(const WorkloadCatalog& catalog, const Trace& trace, const SimOptions& options) {
  Run run(catalog, trace, options);
  SimResult r = run.run();
  r.trace = trace.name;
  return r;
}

}  // namespace aegis
