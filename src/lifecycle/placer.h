// How the job lifecycle asks the engine, and the one-server placer both drivers use.
// The lifecycle knows jobs, not GPUs: a driver gives it a Placer, which knows the GPUs
// (one server for aegisd; for the simulator, a dispatcher over many servers that asks a
// ServerPlacer per server). Every call into the engine goes through a Placer.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/decision.h"
#include "core/gpu.h"
#include "core/running.h"
#include "core/small_list.h"
#include "lifecycle/backfill.h"
#include "sched/engine.h"

namespace aegis {

// Where a job starts: one engine launch per server it spans (a job larger than any server
// runs on several whole servers in the simulator; aegisd has one server, index 0).
struct Placement {
  struct Part {
    int server = 0;
    Launch launch;
    MiB gpu_total_mib = 0;  // capacity of the smallest of its GPUs (the recovery ladder's)
  };
  // One part but for a job larger than a server (the simulator's gang jobs): inline, so a
  // placement is made and moved without a heap block.
  SmallList<Part, 1> parts;

  // On idle GPUs only: nobody beside it (no MPS memory limit then).
  bool alone() const;
  bool exclusive() const;
  MiB admitted_mib() const;  // per GPU, as the engine booked it
};

// The size and kind of one device, for "can this job ever run here".
struct DeviceInfo {
  MiB total_mib = 0;
  bool mig_instance = false;
  // Memory in use on it while no job of aegis runs there and no process shows: the
  // driver's own (616 MiB of an idle H200), NVIDIA's MPS server. Placement never gets it
  // (an idle GPU offers its reported free memory less the guard), so neither does "can
  // ever run".
  MiB held_mib = 0;
  // Memory processes outside aegis hold there now: placement gets it once they end, which
  // aegis does not control ("can run only after they end", Feasibility::why_waits_outside).
  MiB foreign_mib = 0;
  // Processes outside aegis on it now: it is never idle while they run, so a job that must
  // run alone cannot have it until they end.
  int foreign_processes = 0;
};

class Placer {
 public:
  virtual ~Placer() = default;
  // Where `job` can start now, or nothing (then blocked() says why).
  virtual std::optional<Placement> place(const QueuedJob& job, Seconds now) = 0;
  // Called when the lifecycle starts a job where place() said, before the next place()
  // of the same pass: the placer's view of its GPUs must include it.
  virtual void started(const QueuedJob& job, const Placement& p, Seconds now) = 0;
  // Called when the lifecycle does not start a job where place() said (backfill: it would
  // delay the head's reservation): a placer that remembers what it was asked must ask
  // those servers again, as nothing was placed there.
  virtual void declined(const QueuedJob&, const Placement&) {}
  // Why `job` can never run here (one line naming the field), or nothing.
  virtual std::optional<std::string> never_runs(const QueuedJob& job) const = 0;
  // Why `job` can run only once processes outside aegis free memory, or nothing: such a
  // job waits without holding the head of the queue (the simulator has no such process).
  virtual std::optional<std::string> waits_outside(const QueuedJob&) const { return std::nullopt; }
  // Preemption's what-if (lifecycle/preemption.h): where `job` would start now were the
  // running jobs `gone` stopped, or nothing; the placer's view does not change. A placer
  // that cannot tell says nothing, and preemption never happens there.
  virtual std::optional<Placement> place_without(const QueuedJob&, Seconds, std::span<const JobId>) {
    return std::nullopt;
  }
  // The recovery rule: what becomes of a job that failed.
  virtual std::variant<Requeue, Stop> recover(const Failure& f) const = 0;
  // Why the last place() came back empty, and the earliest time a time gate opens.
  virtual std::optional<Blocked> blocked() const { return std::nullopt; }
  virtual std::optional<Seconds> wake_at() const { return std::nullopt; }
  // Backfill's reservations (lifecycle/backfill.h): each server's GPU count, when any job
  // the feasibility rule admits can run on any set of that many idle GPUs of one server
  // (all GPUs alike, none held by processes outside aegis). Empty: it cannot say, and
  // nothing is backfilled.
  virtual std::span<const int> server_gpus() const { return {}; }
  // What `head` asks of each of those GPUs, as the engine computes it (backfill.h's
  // HeadNeed), for a reservation that counts memory it could share; nothing: idle GPUs.
  virtual std::optional<HeadNeed> head_need(const QueuedJob&) const { return std::nullopt; }
};

// "Can this job ever run on these devices": the engine's rule (GPU count, memory alone
// after the guard and what is held outside aegis, whole GPUs for a job on several) with
// the reason in the words of the API. The one feasibility check of aegis: the daemon's
// submit, its queue and the simulator's dispatcher all use it, and a job the recovery
// ladder sends to "a larger GPU" where none is larger fails by it at once. Built once per
// set of devices (drivers ask it for every job they try to place).
class Feasibility {
 public:
  Feasibility(const Engine& engine, std::span<const DeviceInfo> devices);
  std::optional<std::string> why_never_runs(const QueuedJob& job) const;
  // For a job why_never_runs admits: why it cannot run until processes outside aegis free
  // memory (what the devices offer with their foreign memory taken off too), or nothing.
  std::optional<std::string> why_waits_outside(const QueuedJob& job) const;

 private:
  struct Offer {
    MiB usable = 0, total = 0, held = 0;  // usable = total - guard - held (Engine::usable_alone)
  };
  struct Offers {
    std::vector<MiB> all, whole;  // what every device, and every whole GPU, offers alone, largest first
    std::vector<Offer> all_parts, whole_parts;  // the same with their parts, for the reason
  };
  static Offers offers(const Engine& engine, std::span<const DeviceInfo> devices, bool less_foreign, bool alone);
  std::optional<std::string> why_not(const Offers& o, const QueuedJob& job, bool outside) const;
  const Engine& engine_;
  // Held memory off; held and foreign memory off; the same without GPUs that carry
  // processes outside aegis (for a job that must run alone: they are never idle).
  Offers ever_, now_, now_alone_;
  bool any_foreign_ = false;
};

// One server's GPUs as the engine sees them: asks the engine about one job at a time with
// the server's views, running jobs and engine state, and keeps the running jobs in step
// as it starts them. The driver refreshes the views (telemetry, free memory) and the
// running jobs (first activity, ends) between passes.
class ServerPlacer {
 public:
  explicit ServerPlacer(const Engine& engine) : engine_(engine) {}

  std::vector<GpuView> views;
  std::vector<RunningJob> running;  // RunningJob::gpus are indices into views
  EngineState state;
  WindowStatsSource* window_stats = nullptr;  // Snapshot::window_stats (the simulator's lazy windows)

  // The engine's answer for `job` now. `explain`: fill Blocked's reason (costs a little).
  std::optional<Launch> probe(const QueuedJob& job, Seconds now, bool explain = true);
  // A what-if: whether the engine would refuse `job` now were the GPUs' windows those of
  // `windows` (when the engine reads telemetry); nothing of the server changes. The
  // answer is written into `out` (its storage reused). The simulator's pressure what-ifs.
  bool refuses_with(const QueuedJob& job, Seconds now, WindowStatsSource& windows, Decisions& out);
  // Preemption's what-if (Placer::place_without) on this server: the engine's answer for
  // `job` now were the running jobs `gone` stopped, `take_away(r, g, view)` giving back
  // what running job r holds of its GPU g (an index into `views`); nothing of the server changes.
  std::optional<Launch> probe_without(const QueuedJob& job, Seconds now, std::span<const JobId> gone,
                                      const std::function<void(const RunningJob&, int, GpuView&)>& take_away) const;
  // Adds the job to `running`, as launched now.
  void add(const QueuedJob& job, const Launch& l, Seconds now);

  // Per-GPU loads kept in step with `running` (Snapshot::loads), for a driver that changes
  // `running` only through add() and the two calls below: a tick then costs O(GPUs)
  // instead of O(running jobs). Each GPU's load is summed over its own jobs, in `running`'s
  // order, exactly as a tick walking `running` would.
  void keep_loads();
  // running[pos] showed its first activity at t (its GPUs' observation gates move).
  void set_first_activity(std::size_t pos, Seconds t);
  // Removes running[pos]; the last entry takes its place. Returns true if one moved.
  bool remove(std::size_t pos);
  // The loads, summed again where running jobs changed since (lazily: a burst of changes
  // between two asks costs one sum per GPU).
  std::span<const GpuLoad> loads();
  const Decisions& last() const { return last_; }

 private:
  const Engine& engine_;
  Decisions last_;
  bool keep_loads_ = false;
  std::vector<GpuLoad> loads_;
  std::vector<std::vector<std::uint32_t>> on_gpu_;  // per GPU: positions of its jobs in `running`, ascending
  std::vector<int> dirty_;                          // GPUs whose load must be summed again
  std::vector<char> is_dirty_;                      // per GPU: kClean, kGate or kWhole
  static constexpr char kClean = 0, kGate = 1, kWhole = 2;
  void reload(int gpu);
  // Only the latest observation gate again: a first activity moves a job's gate and
  // nothing of its sums, and a maximum is the same in any order.
  void regate(int gpu);
  void mark(int gpu, char what = kWhole);
};

// A Placer for one server (aegisd): its GPUs, asked about one job at a time.
class OneServerPlacer : public Placer {
 public:
  explicit OneServerPlacer(const Engine& engine) : server(engine), engine_(engine) {}
  ServerPlacer server;
  std::optional<Feasibility> feasibility;  // of the same GPUs, for never_runs
  bool explain = true;
  // What each running job's processes use now on each GPU (engine index -> MiB), as the
  // driver read it: place_without frees that much of a job it takes away (else the memory
  // it was admitted with, which a job without an estimate may well exceed).
  std::map<JobId, std::map<int, MiB>> used_mib;

  std::optional<Placement> place(const QueuedJob& job, Seconds now) override;
  void started(const QueuedJob& job, const Placement& p, Seconds now) override;
  std::optional<Placement> place_without(const QueuedJob& job, Seconds now, std::span<const JobId> gone) override;
  std::optional<std::string> never_runs(const QueuedJob& job) const override;
  std::optional<std::string> waits_outside(const QueuedJob& job) const override;
  std::variant<Requeue, Stop> recover(const Failure& f) const override;
  std::optional<Blocked> blocked() const override;
  std::optional<Seconds> wake_at() const override;
  std::span<const int> server_gpus() const override;
  std::optional<HeadNeed> head_need(const QueuedJob& head) const override;

 private:
  const Engine& engine_;
  mutable std::vector<int> server_gpus_;  // server_gpus()'s answer, made when asked
};

}  // namespace aegis
