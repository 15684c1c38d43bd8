// What `aegis sim --seeds N` (N > 1) prints and records: every table as the mean and the
// min-max over the seeds, per-seed results kept in the JSON, and a line for each pair of
// policies within the spread (ranges overlap: not a result). docs/simulator.md "Seeds".
#pragma once
#include <string>
#include <vector>

#include "apps/aegis/sweep.h"
#include "sim/json_report.h"
#include "sim/seed_spread.h"
#include "sim/trace.h"

namespace aegis::cli {

// The per-trace table: for each policy a row of means, then rows of the least and greatest.
void print_table_spread(const Trace& trace, const std::string& cluster, const SeedSpread& s);

// Makespan over exclusive's as mean (min-max) per trace and of the per-seed geometric means,
// then the pairs within the spread of the geometric mean. Empty if exclusive did not run.
std::vector<NormalisedSpread> print_normalised_spread(const std::vector<const Trace*>& traces,
                                                      const std::vector<std::string>& policies,
                                                      const SeedSpread& s);

// The JSON "results" (means, with "min" and "max"), "summary" and "seeds" (every seed's own
// results and geometric means) of a run over several seeds.
void spread_json(Json& out, const SeedSpread& s, const std::vector<NormalisedSpread>& norm);

// --sweep with --seeds N: per point and policy, the per-seed geometric means over traces of
// makespan / exclusive's as mean (min-max), the worst slowdown on any seed, the mean OOM
// attempts per seed; then each point's pairs within the spread. `metrics` holds the runs
// seed by seed, each seed's point by point, each point's policy by policy, trace by trace.
void print_sweep_spread(const std::vector<SweepPoint>& points, const std::vector<std::string>& names,
                        std::size_t ntraces, std::size_t nseeds, const std::vector<RunMetrics>& metrics);

// "a and b: within the spread over N seeds (not a result)" lines for a metric.
std::vector<std::string> within_lines(const std::vector<std::pair<std::string, Spread>>& by_policy, std::size_t seeds);

}  // namespace aegis::cli
