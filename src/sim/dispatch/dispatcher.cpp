#include "sim/dispatch/dispatcher.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <limits>

namespace aegis::simrun {

// The helpers marked inline below have one caller in this file: inlined there as they were
// when the simulator was one file (out of line, the cache checks cost 4 % more
// instructions on 10k Philly jobs under aegis; bench/bench_speed.py --instructions).

ClusterDispatcher::ClusterDispatcher(ClusterState& st, const Engine& engine, const SimOptions& opt,
                                     TelemetryWindows& windows, JobPhysics& physics,
                                     const std::vector<DeviceInfo>& devices)
    : st_(st),
      engine_(engine),
      opt_(opt),
      windows_(windows),
      physics_(physics),
      what_if_(st, windows, opt.engine.telemetry_window_samples),
      feasibility_(engine, devices),
      // The refusal caches (refused lists, the changed shortcut, refused_at_floor) hold
      // only if every stage says a refusal stands for more load, less memory and more
      // activity; otherwise every request asks every server.
      cache_(opt.sim.refusal_cache && engine.refusals_monotone()),
      rooms_(cache_ && engine.tells_refusals_from_room()),
      max_per_server_(opt.cluster.max_gpus_per_server()) {
  for (std::size_t s = 0; s < st.servers.size(); ++s) all_servers_.push_back(static_cast<int>(s));
  const bool alike = std::all_of(devices.begin(), devices.end(), [&](const DeviceInfo& d) {
    return !d.mig_instance && d.total_mib == devices.front().total_mib;
  });
  if (alike)
    for (const auto& srv : st.servers) server_gpus_.push_back(srv.ngpus);
  if (alike && !devices.empty()) gpu_total_mib_ = devices.front().total_mib;
}

// The gang rule, shared by place_gang and preemption's what-if: a job larger than any
// server runs alone on whole idle servers (`idle(s)`), lowest index first, each server's
// engine asked (`ask(s, part)`) for its exclusive part.
template <class Idle, class Ask>
std::optional<Placement> ClusterDispatcher::on_whole_servers(const QueuedJob& job, Idle idle, Ask ask) {
  int remaining = job.spec.num_gpus;
  Placement p;
  for (int s = 0; s < static_cast<int>(st_.servers.size()) && remaining > 0; ++s) {
    ++st_.n_visits;
    if (!idle(s)) continue;
    QueuedJob part = job;
    part.spec.num_gpus = std::min(remaining, st_.servers[static_cast<std::size_t>(s)].ngpus);
    part.recovery.exclusive_only = true;
    if (auto l = ask(s, part)) {
      remaining -= part.spec.num_gpus;
      p.parts.emplace_back(s, std::move(*l), MiB{0});  // made in place
    }
  }
  if (remaining > 0) return std::nullopt;
  return p;
}

std::optional<Placement> ClusterDispatcher::place(const QueuedJob& job, Seconds t) {
  asked_at_ = t;
  const int id = static_cast<int>(job.spec.id);
  Job& j = st_.jobs[id];
  if (j.live->request_floor != job.recovery.floor_mib || j.live->request_exclusive != job.recovery.exclusive_only) {
    j.live->request = engine_.request_shape(job);
    j.live->request_floor = job.recovery.floor_mib;
    j.live->request_exclusive = job.recovery.exclusive_only;
  }
  // Only the very next placement of a pass may keep the servers a start, or a decline,
  // left unasked.
  const bool follows_start = started_last_ || declined_last_;
  started_last_ = false;
  declined_last_ = false;
  auto p = job.spec.num_gpus > max_per_server_ ? place_gang(job, t) : place_single(id, job, t, follows_start);
  if (p)
    for (auto& part : p->parts) {
      part.gpu_total_mib = std::numeric_limits<MiB>::max();
      for (int local : part.launch.gpus)
        part.gpu_total_mib = std::min(part.gpu_total_mib, st_.gpus[st_.servers[part.server].first_gpu + local].total);
    }
  return p;
}

// What a stopped job frees on server s is what it holds now (its memory; a process if it
// was active): preemption's what-if, asked of the server's engine.
std::optional<Launch> ClusterDispatcher::probe_without(int s, const QueuedJob& job, Seconds t,
                                                       std::span<const JobId> gone) {
  Server& srv = st_.servers[static_cast<std::size_t>(s)];
  windows_.set_now(s, t);
  ++st_.n_ticks;
  st_.n_visits += static_cast<std::uint64_t>(srv.ngpus);
  return srv.placer.probe_without(job, t, gone, [&](const RunningJob& r, int g, GpuView& v) {
    const Live& live = *st_.jobs[static_cast<std::size_t>(r.spec.id)].live;
    v.free_mib = std::min(v.total_mib, v.free_mib + live.held_mib);
    const Gpu& gpu = st_.gpus[static_cast<std::size_t>(srv.first_gpu + g)];
    if (std::find(gpu.active.begin(), gpu.active.end(), static_cast<int>(r.spec.id)) != gpu.active.end())
      v.process_count = std::max(0, v.process_count - 1);
  });
}

std::optional<Placement> ClusterDispatcher::place_without(const QueuedJob& job, Seconds t, std::span<const JobId> gone) {
  // The servers the victims run on, in index order (elsewhere nothing changes: place()
  // asked those already). A victim on several servers frees all of its parts.
  std::vector<int> servers;
  for (JobId id : gone)
    if (const Job& v = st_.jobs[static_cast<std::size_t>(id)]; v.on_gpus())
      for (const auto& part : v.live->parts) servers.push_back(part.server);
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  if (job.spec.num_gpus > max_per_server_) return gang_without(job, t, gone, servers);
  for (int s : servers) {
    auto l = probe_without(s, job, t, gone);
    if (!l) continue;
    Placement p;
    p.parts.push_back({s, std::move(*l), 0});
    return p;
  }
  return std::nullopt;
}

// place_gang's rule with the victims gone: whole idle servers, lowest index first, a
// server counting as idle when every job on it is a victim. Counted first, without an
// ask: the lifecycle's victim rule asks this once per victim it takes, and most of those
// asks free too few servers for any engine to be asked.
std::optional<Placement> ClusterDispatcher::gang_without(const QueuedJob& job, Seconds t, std::span<const JobId> gone,
                                                         std::span<const int> touched) {
  std::vector<JobId> victims(gone.begin(), gone.end());
  std::sort(victims.begin(), victims.end());
  int freed = st_.whole_idle_gpus;
  std::vector<int> emptied;  // busy servers on which every job is a victim, ascending
  for (int s : touched) {
    const Server& srv = st_.servers[static_cast<std::size_t>(s)];
    st_.n_visits += srv.placer.running.size();
    if (srv.idle_gpus == srv.ngpus) continue;  // counted in whole_idle_gpus already
    if (std::all_of(srv.placer.running.begin(), srv.placer.running.end(), [&](const RunningJob& r) {
          return std::binary_search(victims.begin(), victims.end(), r.spec.id);
        })) {
      freed += srv.ngpus;
      emptied.push_back(s);
    }
  }
  if (freed < job.spec.num_gpus) return std::nullopt;
  return on_whole_servers(
      job,
      [&](int s) {
        const Server& srv = st_.servers[static_cast<std::size_t>(s)];
        return srv.idle_gpus == srv.ngpus || std::binary_search(emptied.begin(), emptied.end(), s);
      },
      [&](int s, const QueuedJob& part) { return probe_without(s, part, t, gone); });
}

void ClusterDispatcher::started(const QueuedJob& job, const Placement& p, Seconds t) {
  physics_.launch(job, p, t);
  started_last_ = true;
  if (declined_in_pass_) st_.dirty = true;  // a job declined before it may go elsewhere now (declined())
}

// The refusal caches assume that every server a pass listed and did not place on refused
// (place_single's invariant); a placement backfill declined breaks that for its servers,
// which would otherwise not be asked again until something on them changed (10k Philly,
// exclusive: 8-GPU heads waited up to 17,714 s beside a whole idle server).
// A decline, unlike a refusal, may turn when servers get busier: the job was offered only
// its best server, and a job started after it in the same pass may take that one, leaving
// it a next best that keeps the reservation. So started() then leaves the next pass due
// (st_.dirty) instead of letting it be skipped (docs/dispatcher.md).
void ClusterDispatcher::declined(const QueuedJob&, const Placement& p) {
  // The engine chose its GPUs with some observation gates shut; once one opens it may choose
  // another, which backfill's join rules may take: the server is woken at the first opening,
  // as a refusal by a gate wakes it (without it both modes of the memo missed that pass).
  constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();
  const bool gates = engine_.gate_opens_after_activity(0).has_value();  // observation gates exist
  for (const auto& part : p.parts) {
    st_.changed.push_back(part.server);
    Server& srv = st_.servers[static_cast<std::size_t>(part.server)];
    srv.declined_version = srv.version;
    // The engine's choice of GPUs also follows the telemetry windows (the pressure filter,
    // orders by activity): while they change, another sample may give another choice,
    // which the join rules may take; so the server is asked again at the next sample, as
    // without the memo every pass would (found with backfill_join_slowdown > 1, whose
    // declines are many: 1,000 Philly jobs on 8 servers launched differently with the memo
    // on and off).
    if (cache_) {
      locals_.resize(static_cast<std::size_t>(srv.ngpus));
      std::iota(locals_.begin(), locals_.end(), 0);
      if (windows_.changing(srv, locals_, asked_at_)) {
        const double hz = opt_.engine.telemetry_sample_hz;
        st_.push_wake(part.server, (std::floor(asked_at_ * hz + 1e-9) + 1) / hz);
      }
    }
    if (!gates) continue;
    Seconds opens = kNever;
    for (const RunningJob& r : srv.placer.running)
      if (const Seconds g = engine_.gate_opens_at(r); g > asked_at_) opens = std::min(opens, g);
    if (opens < kNever) st_.push_wake(part.server, opens);
  }
  declined_in_pass_ = true;
  // Nothing was placed: the servers listed and not asked are as they were (place_single).
  declined_last_ = true;
}

std::optional<std::string> ClusterDispatcher::never_runs(const QueuedJob& job) const {
  // No device of this cluster could hold it (e.g. a MIG instance too small for it): it
  // leaves the queue as stopped instead of blocking everything behind it.
  // Asked for every queued job the lifecycle looks at, each pass: the answer depends only
  // on the job and its recovery floor, so a yes is remembered until the floor moves.
  Live& live = *st_.jobs[static_cast<std::size_t>(job.spec.id)].live;
  if (live.feasible_floor == job.recovery.floor_mib) return std::nullopt;
  auto why = feasibility_.why_never_runs(job);
  if (!why) live.feasible_floor = job.recovery.floor_mib;
  return why;
}

void ClusterDispatcher::activity_began(const Job& j, Seconds t) {
  // The observation gate now runs from this activity: it opens at a known time and,
  // until then, refusals of its servers stand (the activity only closes gates), so
  // they are asked again then, not now; a server that remembers no refusal will be
  // asked anyway, and its refusal names that time. Without a gate nothing opens.
  if (auto opens = engine_.gate_opens_after_activity(t)) {
    if (*opens > t && cache_) {
      for (const auto& p : j.live->parts) {
        const Server& srv = st_.servers[p.server];
        // A server that declined a placement since it last changed remembers no refusal,
        // yet the pass after its gate opens may place there (the engine's choice of GPUs
        // moves with the gate; backfill's join rules judge that choice): woken then too.
        if ((srv.refused_version == srv.version && !srv.refused.empty()) || srv.declined_version == srv.version)
          st_.push_wake(p.server, *opens);
      }
    } else {
      for (const auto& p : j.live->parts) st_.bump(p.server);
    }
  }
}

// Asks server s's engine whether it would start `job` now; on a refusal, remembers it
// and schedules the wake-ups the engine asked for.
inline std::optional<Launch> ClusterDispatcher::probe(int s, const QueuedJob& job, const Engine::RequestShape& key, Seconds t) {
  Server& srv = st_.servers[s];
  windows_.set_now(s, t);
  ++st_.n_ticks;
  st_.n_visits += static_cast<std::uint64_t>(srv.ngpus);
  if (auto l = srv.placer.probe(job, t, false)) return l;
  const Decisions& d = srv.placer.last();
  if (cache_) remember_refusal(srv, key);
  if (d.wake_at && *d.wake_at > t) st_.push_wake(s, *d.wake_at);
  // A job held back by the pressure filter may pass as the windows change, sample by
  // sample, until they settle; ask again at each sample unless it cannot pass at all.
  if (d.blocked && d.blocked->by_pressure && windows_.changing(srv, d.blocked->pressure_gpus, t) &&
      !(cache_ && what_if_.refused_at_floor(srv, job, t, d.blocked->pressure_gpus))) {
    const double hz = opt_.engine.telemetry_sample_hz;
    const double k_now = std::floor(t * hz + 1e-9);
    if (!cache_ || !windows_.falling(srv, d.blocked->pressure_gpus, t)) {
      st_.push_wake(s, (k_now + 1) / hz);
    } else if (const std::int64_t j = what_if_.first_passing_sample(srv, job, t, d.blocked->pressure_gpus); j > 0) {
      // Falling windows: asked again at the first sample that passes, not at every one.
      st_.push_wake(s, (k_now + static_cast<double>(j)) / hz);
    }
  }
  return std::nullopt;
}

inline void ClusterDispatcher::remember_refusal(Server& srv, const Engine::RequestShape& key) {
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

[[gnu::always_inline]] inline bool ClusterDispatcher::refused_already(int s, const Engine::RequestShape& request) const {
  const Server& srv = st_.servers[s];
  if (!cache_ || srv.refused_version != srv.version) return false;
  for (auto it = std::lower_bound(srv.refused.begin(), srv.refused.end(), request, by_kind);
       it != srv.refused.end() && it->kind == request.kind; ++it)
    if (request.covers(*it)) return true;
  return false;
}

// True when server s's engine would refuse `request` for n GPUs at t, told from the
// server's room without an ask (Engine::room_refuses); a refusal by a gate is
// remembered as an asked one would be, with the wake-up at that gate's opening.
[[gnu::always_inline]] inline bool ClusterDispatcher::room_refuses(int s, const Engine::RequestShape& request, int n, Seconds t) {
  if (!rooms_) return false;
  Server& srv = st_.servers[static_cast<std::size_t>(s)];
  if (srv.room_stale) {
    srv.has_room = engine_.room_update(srv.placer.views, srv.placer.loads(), srv.room_changed, srv.room);
    srv.room_stale = false;
    srv.room_changed = 0;
    st_.n_visits += static_cast<std::uint64_t>(srv.ngpus);
  }
  Seconds wake = 0;
  if (!srv.has_room || !engine_.room_refuses(srv.room, request, n, t, wake)) return false;
  // A refusal that names no gate stands until memory or load is freed, which rebuilds
  // the room: it needs no memo (nor the wake-up a job's first activity gives servers
  // that remember refusals, for their gates).
  if (wake < std::numeric_limits<Seconds>::infinity()) {
    remember_refusal(srv, request);
    if (wake > t) st_.push_wake(s, wake);
  }
  return true;
}

// Servers in the order the dispatcher asks them: those with enough idle GPUs for the
// job to run alone first (fewest idle GPUs first: keeps whole servers free for large
// jobs), then, if the policy shares GPUs, the others by most free memory.
// Where `job` would start: the first server that takes it in the dispatcher's order.
//
// Servers listed but not asked (the job started on a better one) stay candidates: they
// are kept at the front of order_ (left_ of them) rather than put back in changed.
// When the next call is the very next placement of the same lifecycle pass (nothing
// happened since but the launch, which touched only the chosen server and listed it in
// changed, or backfill's decline of it, which touched nothing and listed it in changed
// too) for a request equal to theirs (same shape, GPU count, sharing, time), each
// kept entry is what listing its server again would give: the filters below read only
// the server (its refusals, idle GPUs, room, free memory: unchanged, as no event ran
// and only the chosen server was asked or launched on) and the request. Their side
// effects (a remembered refusal, a wake-up) come only with a refusal, and these servers
// were listed, i.e. not refused. So the entries are kept as they are and only the
// changed servers are listed (whole Philly trace under aegis: 2.55M of 2.71M listings
// were such servers listed again; 89 % of the placements that follow a start ask for
// the same as the one before). After a decline too: under backfill_joins = by_reservation
// (10k Philly jobs, 64 x 8 GPUs, seed 1) 25.2M of 25.7M placements are declined, almost all
// for joining a job that runs past the reservation, and each next one listed and filtered
// its kept servers anew (1.32 billion servers listed, 51 a placement); 22.2M now keep them.
inline std::optional<Placement> ClusterDispatcher::place_single(int id, const QueuedJob& job, Seconds t, bool follows_start) {
  const int n = job.spec.num_gpus;
  const bool shares = engine_.config().collocate && !job.recovery.exclusive_only;
  const Engine::RequestShape key = st_.jobs[id].live->request;
  // After a pass for request P, every server outside changed and the kept entries has
  // refused (at its current version) something P covers, or cannot take P's size at
  // all. So for a request that covers P only those need asking; otherwise all do.
  const bool every_server = !cache_ || !key.covers(scanned_);
  const bool keep = follows_start && !every_server && left_ > 0 && n == left_n_ && shares == left_shares_ &&
                    t == left_t_ && key == scanned_;
  scanned_ = key;
  if (order_.size() < st_.servers.size()) order_.resize(st_.servers.size());
  Candidate* const order = order_.data();
  std::size_t listed = 0;
  candidates_.clear();
  if (every_server) {
    st_.changed.clear();
  } else {
    // Each server once (the selection below orders them; their order here does not matter).
    ++candidate_stamp_;
    if (keep) {
      listed = left_;
    } else {
      for (std::size_t i = 0; i < left_; ++i) {
        const int s = order[i].server();
        st_.servers[s].candidate_stamp = candidate_stamp_;
        candidates_.push_back(s);
      }
    }
    for (int s : st_.changed) {
      if (st_.servers[s].candidate_stamp == candidate_stamp_) continue;
      st_.servers[s].candidate_stamp = candidate_stamp_;
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
    st_.changed.clear();
  }
  left_ = 0;
  // Every server is the list of all of them, made once (11k such passes on the whole
  // trace, 64 servers each), not appended server by server at each pass.
  const std::span<const int> listing = every_server ? std::span<const int>(all_servers_) : candidates_;
  st_.n_visits += listing.size() + listed;
  // Written in place in an array of one entry per server: an append per server is a
  // call where the compiler declines to inline it (it did in a unity batch).
  for (int s : listing) {
    const Server& srv = st_.servers[s];
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

// A job larger than any server, on the whole servers idle now (on_whole_servers).
std::optional<Placement> ClusterDispatcher::place_gang(const QueuedJob& job, Seconds t) {
  const int remaining = job.spec.num_gpus;
  // Too few whole idle servers: no part could be kept, so none is asked for (a gang job
  // waiting at the head would otherwise be tried on every idle server at every pass).
  // Their GPUs are counted as servers fill and empty (whole_idle_gpus), not by a walk
  // over every server at each pass.
  if (st_.whole_idle_gpus < remaining) {
    last_gang_blocked_ = job.spec.num_gpus;
    return std::nullopt;
  }
  const auto idle_now = [&](int s) {
    const Server& srv = st_.servers[static_cast<std::size_t>(s)];
    return srv.idle_gpus == srv.ngpus;
  };
  auto p = on_whole_servers(job, idle_now, [&](int s, const QueuedJob& part) {
    return probe(s, part, engine_.request_shape(part), t);
  });
  if (!p) last_gang_blocked_ = job.spec.num_gpus;  // told only if the run stalls (formatting it each pass cost 1 %)
  return p;
}

}  // namespace aegis::simrun
