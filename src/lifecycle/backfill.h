// Conservative backfill (issue 32 item 5; docs/lab-policies.md, "Backfill"). When the head
// of the queue waits, its reserved start is the earliest time enough GPUs will be idle for
// it, running jobs ending at their time limits; a later job may start now only if it fits
// now and its own time limit ends it by then, so the head's reservation never moves later.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "core/job.h"
#include "core/units.h"

namespace aegis {

// One GPU an aegis job holds, and when it will have let it go (infinity: it may run on).
struct HeldGpu {
  int server = 0;
  int gpu = 0;
  Seconds until = 0;
};

// The head's reserved start: the earliest time `num_gpus` GPUs of one server (or, for a job
// larger than any server, enough whole servers) are idle, given each server's GPU count
// and the GPUs held until when. A job the feasibility rule admits can be placed on GPUs once
// they are idle (docs/architecture.md), so this bounds when the head can start. Nothing
// when no such time is known (a running job without a limit holds what it needs).
std::optional<Seconds> reserved_start(int num_gpus, std::span<const int> server_gpus,
                                      std::span<const HeldGpu> held, Seconds now);

// Whether `job` may start ahead of a head reserved from `reserved`: it must have a time
// limit that ends it by then.
bool may_backfill(const JobSpec& job, Seconds now, Seconds reserved);

}  // namespace aegis
