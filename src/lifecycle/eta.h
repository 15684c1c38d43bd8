// Expected starts of the waiting jobs (issue 32 item 5, `aegis queue --eta`): the live
// queue served forward by a copy of the lifecycle (its order, strict head-of-line, backfill
// when on), every running job ending when expected (its time limit, or its history-predicted
// duration when shorter: lifecycle/backfill.h expected_end) and every started one holding
// whole GPUs until its own. An estimate: sharing can start a job earlier, a job without
// either has no end to wait for (then the jobs that need its GPUs get none).
#pragma once
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "lifecycle/lifecycle.h"

namespace aegis {

struct StartEstimates {
  std::vector<std::pair<JobId, std::optional<Seconds>>> starts;  // each queued job, in queue order
  int passes = 0;  // schedule passes run: at most one per end of a job, plus one
};

// `server_gpus`: each server's GPU count (Placer::server_gpus()); empty: nothing is known.
StartEstimates estimate_starts(const Lifecycle& live, Seconds now, std::span<const int> server_gpus);

}  // namespace aegis
