// The cluster dispatcher (docs/dispatcher.md): the lifecycle's Placer in the simulator.
// Picks a server for each job (whole idle servers for a gang job), asking each server's
// engine through its ServerPlacer; remembers refusals (per server, void when it changes),
// tells refusals from a server's room without an ask, and schedules the wake-ups after
// which a refusal may turn. The only part of the simulator that asks an engine to decide,
// always through the server's ServerPlacer (an ask, or a what-if: dispatch/what_if.h).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "lifecycle/placer.h"
#include "sched/engine.h"
#include "sim/dispatch/what_if.h"
#include "sim/simulator.h"
#include "sim/world/physics.h"
#include "sim/world/state.h"
#include "sim/world/telemetry.h"

namespace aegis::simrun {

// A server in the dispatcher's order: those where the job runs alone on idle GPUs first,
// fewest idle GPUs first, then those where it would share, most free memory first; ties
// by index. The rank, its figure and the index are one unsigned key, so that picking the
// best (a scan of some 20 entries per ask) compares one integer: the top bit is the rank,
// the low kServerBits the server's index, the 43 bits between the idle GPUs (0 to a
// server's GPU count) or kMostFree minus the free memory (a server's free memory is its
// GPUs' capacity less what they hold: from 0 to its capacity, which the simulator holds
// to kMostFree, as it holds the servers to 2^kServerBits). So the keys order exactly as
// the (rank, figure, index) triples do.
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

class ClusterDispatcher final : public Placer {
 public:
  // `st` holds its servers already; `devices` are the cluster's, for never_runs.
  ClusterDispatcher(ClusterState& st, const Engine& engine, const SimOptions& opt, TelemetryWindows& windows,
                    JobPhysics& physics, const std::vector<DeviceInfo>& devices);

  std::optional<Placement> place(const QueuedJob& job, Seconds t) override;
  void started(const QueuedJob& job, const Placement& p, Seconds t) override;
  // Backfill declined a placement: its servers refused nothing, so they are asked again
  // (listed as changed; their refusals still stand).
  void declined(const QueuedJob& job, const Placement& p) override;
  std::optional<std::string> never_runs(const QueuedJob& job) const override;
  // Preemption's what-if (issue 32 item 1): each server that runs one of `gone`, asked as
  // if those were stopped (their memory and processes gone). A job larger than a server
  // asks for whole servers that idle or that the victims would empty (docs/lab-policies.md).
  std::optional<Placement> place_without(const QueuedJob& job, Seconds t, std::span<const JobId> gone) override;
  // Without the requeue's words: the simulator shows no waiting job's reason (a stopped
  // job's reason, which it records, is always written).
  std::variant<Requeue, Stop> recover(const Failure& f) const override { return engine_.recover(f, false); }
  // Backfill's reservations (issue 32 item 5): each server's GPU count, when every device
  // is alike (same memory, no MIG); else none.
  std::span<const int> server_gpus() const override { return server_gpus_; }
  std::optional<HeadNeed> head_need(const QueuedJob& head) const override {
    if (server_gpus_.empty()) return std::nullopt;
    return aegis::head_need(engine_, head, gpu_total_mib_);
  }

  // The lifecycle's pass is over: events come next.
  void pass_over() {
    started_last_ = false;
    declined_last_ = false;
    declined_in_pass_ = false;
  }
  // Job j's attempt showed its first activity (its gates now run from t).
  void activity_began(const Job& j, Seconds t);
  // The refusal caches are on: a pass with nothing new and no server changed is skipped.
  bool caches() const { return cache_; }
  // GPUs of the last gang job that found too few whole idle servers (0: none).
  int last_gang_blocked() const { return last_gang_blocked_; }

 private:
  std::optional<Placement> place_single(int id, const QueuedJob& job, Seconds t, bool follows_start);
  std::optional<Placement> place_gang(const QueuedJob& job, Seconds t);
  template <class Idle, class Ask>
  std::optional<Placement> on_whole_servers(const QueuedJob& job, Idle idle, Ask ask);
  std::optional<Launch> probe_without(int s, const QueuedJob& job, Seconds t, std::span<const JobId> gone);
  std::optional<Placement> gang_without(const QueuedJob& job, Seconds t, std::span<const JobId> gone,
                                        std::span<const int> touched);
  std::optional<Launch> probe(int s, const QueuedJob& job, const Engine::RequestShape& key, Seconds t);
  void remember_refusal(Server& srv, const Engine::RequestShape& key);
  bool refused_already(int s, const Engine::RequestShape& request) const;
  bool room_refuses(int s, const Engine::RequestShape& request, int n, Seconds t);
  static bool by_kind(const Engine::RequestShape& a, const Engine::RequestShape& b) { return a.kind < b.kind; }

  ClusterState& st_;
  const Engine& engine_;
  const SimOptions& opt_;
  TelemetryWindows& windows_;
  JobPhysics& physics_;
  PressureWhatIf what_if_;
  Feasibility feasibility_;  // of the cluster's devices
  bool cache_;   // refusal caches on (sim.refusal_cache and monotone stages)
  bool rooms_;   // with cache_: the engine tells refusals from a room (Engine::tells_refusals_from_room)
  int max_per_server_;
  std::vector<Candidate> order_;  // place_single's servers to ask (one entry per server)
  std::vector<int> candidates_;   // servers to list in a pass that is not a full one
  std::vector<int> all_servers_;  // 0, 1, ..., servers - 1
  std::uint64_t candidate_stamp_ = 0;
  // The first left_ entries of order_: servers listed but not asked by the last
  // place_single that started its job, for n GPUs, sharing or not, at time t.
  std::size_t left_ = 0;
  int left_n_ = 0;
  bool left_shares_ = false;
  Seconds left_t_ = 0;
  int left_started_ = -1;  // the server that last call's job started on (asked, so not kept)
  bool started_last_ = false;  // the lifecycle started a job and has asked nothing since
  bool declined_last_ = false;  // backfill declined the last placement and nothing was asked since
  bool declined_in_pass_ = false;  // backfill declined a placement in this pass (declined())
  Seconds asked_at_ = 0;           // the time of the last place(): the pass's (declined() has none)
  Engine::RequestShape scanned_{kNoJob, 0, 0};  // request of the last pass
  int last_gang_blocked_ = 0;
  std::vector<int> server_gpus_;  // server_gpus()'s answer (issue 32 item 5)
  MiB gpu_total_mib_ = 0;         // each GPU's memory, when server_gpus_ says they are alike
  std::vector<int> locals_;       // 0..n-1, a declined server's GPUs (declined())
};

}  // namespace aegis::simrun
