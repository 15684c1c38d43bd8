// What `aegis sim` prints and writes: comparison tables, per-attempt and mapping CSVs.
#pragma once
#include <string>
#include <vector>

#include "sim/metrics.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace aegis::cli {

void print_table(const Trace& trace, const std::string& cluster, std::uint64_t seed, const std::vector<RunMetrics>& ms);

// Makespan of each policy over exclusive's, per trace and their geometric mean.
// Returns policy -> geometric mean (empty if exclusive did not run).
std::vector<std::pair<std::string, double>> print_normalised(const std::vector<const Trace*>& traces,
                                                             const std::vector<std::string>& policies,
                                                             const std::vector<RunMetrics>& all);

// Throws InputError if a file cannot be written. With `seed_of_run` (one per run), a first
// column "seed" says which seed each row's run used (--seeds N > 1).
void write_jobs_csv(const std::string& path, const std::vector<SimResult>& runs,
                    const std::vector<std::uint64_t>& seed_of_run = {});
void write_mapping_csv(const std::string& path, const std::vector<const Trace*>& traces);

}  // namespace aegis::cli
