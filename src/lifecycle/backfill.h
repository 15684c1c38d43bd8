// Conservative backfill (issue 32 item 5; docs/lab-policies.md, "Backfill"). When the head
// of the queue waits, its reserved start is the earliest time enough GPUs of one server can
// take it, running jobs ending at their time limits: idle GPUs, or, when the engine shares
// GPUs, GPUs with the memory the engine asks of the head free beside the jobs still running.
// A later job may start now only if it fits now and the reservation, counted with it, is no
// later: it ends by then, or what it takes is not what the head needs. Every job counts to
// its expected end: its time limit, or its history-predicted duration when shorter.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/job.h"
#include "core/units.h"

namespace aegis {

class Engine;

// One GPU an aegis job holds, and when it will have let it go (infinity: it may run on).
// `mib`: the memory the engine booked for it there; `exclusive`: nobody may join it.
struct HeldGpu {
  int server = 0;
  int gpu = 0;
  Seconds until = 0;
  MiB mib = 0;
  bool exclusive = false;
};

// What the head asks of each GPU, as the engine computes it (Engine::request_shape):
// `shares` when it may run beside other jobs (the engine collocates and its recovery does
// not demand a GPU alone); then a GPU can take it once `usable_mib` (an idle GPU's memory
// after the guard) less what the jobs still there booked is at least `need_mib`, and no
// job there runs exclusive. Otherwise it needs idle GPUs.
struct HeadNeed {
  bool shares = false;
  MiB need_mib = 0;
  MiB usable_mib = 0;
};

// The engine's figures for `head` on GPUs of `gpu_total_mib` (all alike).
HeadNeed head_need(const Engine& engine, const QueuedJob& head, MiB gpu_total_mib);

// The head's reserved start: the earliest time `num_gpus` GPUs of one server (or, for a job
// larger than any server, enough whole idle servers) can take it, given each server's GPU
// count and the GPUs held until when. Without `need` (or when it does not share) a GPU can
// take it once idle. Nothing when no such time is known (a running job without a limit
// holds what it needs). Memory as booked, not as used, and pressure or telemetry gates
// are not decidable ahead: under sharing this is the engine's memory rule, an estimate.
std::optional<Seconds> reserved_start(int num_gpus, std::span<const int> server_gpus,
                                      std::span<const HeldGpu> held, Seconds now,
                                      const std::optional<HeadNeed>& need = std::nullopt);

// reserved_start for one head through a backfill pass: each server's answer kept, so that
// asking it again with a candidate's GPUs held too recomputes only the servers those are on
// (a pass asks once per candidate; from scratch that was every GPU of the cluster each
// time). Its answers are reserved_start's exactly: reserved_start is this, asked once.
class ReservationBook {
 public:
  void reset(int num_gpus, std::span<const int> server_gpus, std::span<const HeldGpu> held, Seconds now,
             const std::optional<HeadNeed>& need);
  // reserved_start(num_gpus, server_gpus, held, now, need) for what reset() and add() were given.
  std::optional<Seconds> start() const;
  // The same with `extra` held too (appended after what is held), nothing of the book changed.
  std::optional<Seconds> start_with(std::span<const HeldGpu> extra);
  void add(std::span<const HeldGpu> extra);  // `extra` held from now on
  // Servers' answers computed since construction (the work a test can bound: a server per
  // server at reset(), one per server of `extra` at start_with() and add()).
  std::uint64_t answers_made() const { return answers_made_; }

 private:
  struct ServerAnswer {
    Seconds ready = 0;  // when num_gpus of its GPUs can take the head (infinity: never, or too few GPUs)
    Seconds idle = 0;   // when all its GPUs are idle (for a job larger than any server)
  };
  ServerAnswer answer(int server, std::span<const HeldGpu> extra);
  std::optional<Seconds> start_from(std::span<const ServerAnswer> answers) const;
  std::size_t gpu_at(const HeldGpu& h) const;  // npos outside the servers
  bool first_of_server(std::span<const HeldGpu> extra, std::size_t i) const;

  int num_gpus_ = 0;
  Seconds now_ = 0;
  std::optional<HeadNeed> need_;
  std::vector<int> server_gpus_;
  std::vector<std::size_t> first_;                // each server's first GPU in jobs_
  std::vector<std::vector<HeldGpu>> jobs_;        // per GPU, in the order held
  std::vector<ServerAnswer> answers_;             // per server
  std::vector<ServerAnswer> scratch_answers_;     // start_with's copy
  std::vector<const HeldGpu*> on_gpu_;            // answer()'s scratch
  std::vector<Seconds> ready_;                    // answer()'s scratch
  std::uint64_t answers_made_ = 0;
};

// When an attempt of `job` launched at `launched_at` is expected to end, as seen at `now`:
// at its time limit, or at its history-predicted duration when that is earlier and not yet
// passed. A job that outruns its prediction is not stopped (only the limit stops it): it is
// then expected to run to its limit. Nothing without either: it may run on.
std::optional<Seconds> expected_end(const JobSpec& job, Seconds launched_at, Seconds now);

// Whether `job`, started now, is expected to end by `reserved` (then it cannot take from the head).
bool may_backfill(const JobSpec& job, Seconds now, Seconds reserved);

// When a running job expected to end at `end` ends if a job joins its GPUs now and slows what
// it has left by `slowdown` (>= 1; backfill_join_slowdown): now + (end - now) x slowdown.
// Infinity stays infinity, an idle GPU's -infinity stays -infinity, a passed end stays put.
Seconds slowed_end(Seconds end, Seconds now, double slowdown);

// The GPUs aegis jobs run on during one pass, and until when they are expected to (the
// latest end there), for `backfill_joins`: running jobs have precedence over a job started
// out of order, and under sharing one that joined their GPUs would slow them.
class BusyGpus {
 public:
  void reset(std::span<const int> server_gpus);  // all idle
  void mark(int server, int gpu, Seconds until);  // ignored outside the servers
  bool busy(int server, int gpu) const;
  Seconds until(int server, int gpu) const;  // the latest expected end there (-inf: idle)
 private:
  std::size_t at(int server, int gpu) const;  // npos outside the servers
  std::vector<std::size_t> first_;  // each server's first GPU in until_
  std::vector<Seconds> until_;
};

}  // namespace aegis
