// Conservative backfill (issue 32 item 5; docs/lab-policies.md, "Backfill"). When the head
// of the queue waits, its reserved start is the earliest time enough GPUs of one server can
// take it, running jobs ending at their time limits: idle GPUs, or, when the engine shares
// GPUs, GPUs with the memory the engine asks of the head free beside the jobs still running.
// A later job may start now only if it fits now and the reservation, counted with it, is no
// later: it ends by then, or what it takes is not what the head needs. Every job counts to
// its expected end: its time limit, or its history-predicted duration when shorter.
#pragma once
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

// When an attempt of `job` launched at `launched_at` is expected to end, as seen at `now`:
// at its time limit, or at its history-predicted duration when that is earlier and not yet
// passed. A job that outruns its prediction is not stopped (only the limit stops it): it is
// then expected to run to its limit. Nothing without either: it may run on.
std::optional<Seconds> expected_end(const JobSpec& job, Seconds launched_at, Seconds now);

// Whether `job`, started now, is expected to end by `reserved` (then it cannot take from the head).
bool may_backfill(const JobSpec& job, Seconds now, Seconds reserved);

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
