// Gives each job of a production trace the profile of a catalog workload, as the
// published method did: among workloads with the job's GPU count (or the nearest count
// the catalog has), the one at the nearest runtime quantile; ties and equal durations are
// spread by a seeded draw. The job keeps its own arrival, GPU count and duration.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace.h"
#include "sim/workload.h"

namespace aegis {

// Fills TraceJob::workload for every job (which must have duration_s set). With
// `workload_runtime`, clears duration_s so that the job runs for the workload's solo
// runtime. Returns a one-line description of the method for the record.
std::string map_workloads(std::vector<TraceJob>& jobs, const WorkloadCatalog& catalog, std::uint64_t seed,
                          bool workload_runtime);

}  // namespace aegis
