// The simulated cluster's state that the simulator's parts share: jobs in flight, GPUs,
// servers (with what each server's engine sees), the event queue and the work counts.
// Plain data plus the two signals every part sends: a server changed (bump), wake a server.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/gpu.h"
#include "core/small_list.h"
#include "core/units.h"
#include "lifecycle/placer.h"
#include "sched/engine.h"
#include "sim/models/phases.h"
#include "sim/world/events.h"
#include "sim/workload.h"
#include "telemetry/risk.h"

namespace aegis::simrun {

constexpr std::uint64_t kNoJob = std::numeric_limits<std::uint64_t>::max();

// The part of a running attempt that lives on one server (a gang job has several).
struct Part {
  int server = 0;
  int running_pos = -1;  // index in Server::placer.running
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
  // (less what a checkpoint saved before a stop: an attempt resumes from it; issue 32 item 1)
  double saved_work = 0;           // the current attempt's work at its last checkpoint
  // The current attempt.
  Seconds last_update = 0;
  double work_done = 0;
  double speed = 1;
  std::uint64_t speed_stamp = 0;   // the refresh() that last worked out its speed
  Seconds ends_at = 0;             // time of its pending completion event
  ActivityLevels level;            // its activity now: its phase's levels (sim/models/phases.h)
  bool anchored = false;           // the lifecycle has been told its activity began (its anchor)
  bool active = false;             // has shown GPU activity
  MiB held_mib = 0;                // per GPU
  std::optional<MiB> mps_limit;    // its MPS client memory limit, as the lifecycle set it
  // Inline up to 8 GPUs on 2 servers (all but 0.3 % of Philly's jobs): a launch and an
  // end allocate nothing.
  SmallList<int, 8> gpus;          // cluster-wide ids
  SmallList<Part, 2> parts;
};

// 32 bytes, a million of them at --repeat 13: its trace job is the one at its own id in
// the trace, its record a number (Recorder), not pointers of their own, and its work is
// kept while it lives (Live::work). Its state in the job's life (queued, failed, stopped,
// ...) is the lifecycle's JobState; the simulator keeps only what the physics needs.
struct Job {
  const WorkloadProfile* w = nullptr;
  std::unique_ptr<Live> live;      // from its arrival to its end (completed or stopped)
  std::uint32_t attempt = 0;       // launches so far; identifies activity events
  std::uint32_t version = 0;       // identifies the valid completion event
  std::uint32_t slot = 0;          // its result: Recorder::record(slot), in trace-index order

  // Its current attempt holds GPUs: launched, and not ended by completion or OOM. (Events
  // of an ended attempt are stale.)
  bool on_gpus() const { return live && !live->parts.empty(); }
};

using Runs = std::vector<std::pair<GpuSample, std::uint32_t>>;  // a window as runs of equal samples

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
  Runs window;
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
  // Backfill declined a placement on it at this version (ClusterDispatcher::declined): a
  // gate opening may turn a decline (the engine then picks other GPUs), so it is woken then.
  std::uint64_t declined_version = kNoJob;
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

template <class T>
void erase_value(std::vector<T>& v, T x) {
  auto it = std::find(v.begin(), v.end(), x);
  if (it != v.end()) v.erase(it);
}

struct ClusterState {
  std::vector<Job> jobs;  // job id = position in the trace
  std::vector<Gpu> gpus;  // cluster-wide GPU ids
  std::vector<Server> servers;
  EventQueue events;
  Seconds start = 0;  // first arrival
  // Servers changed since the dispatcher's last pass (it asks them again first).
  std::vector<int> changed;
  bool dirty = true;  // a job arrived or a server changed since the last lifecycle pass
  int whole_idle_gpus = 0;  // GPUs of the servers with every GPU idle (the gang bound)
  // Work counts (SimResult::events, ticks, visits).
  std::uint64_t n_events = 0, n_ticks = 0, n_visits = 0;

  // Something on server s changed that may let it accept what it refused: its earlier
  // refusals no longer hold.
  void bump(int s) {
    servers[static_cast<std::size_t>(s)].version++;
    changed.push_back(s);
    dirty = true;
  }

  void push_wake(int server, Seconds t) {
    // One Wake event per (server, time): a server has a few pending at most (gate
    // openings, the next telemetry sample), so a scan of its own list finds a twin faster
    // than a tree of every server's.
    auto& pending = servers[static_cast<std::size_t>(server)].wakes;
    if (std::find(pending.begin(), pending.end(), t) != pending.end()) return;
    pending.push_back(t);
    events.push(t, EvKind::Wake, server, 0);
  }
};

}  // namespace aegis::simrun
