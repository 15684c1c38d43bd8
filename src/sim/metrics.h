// Summary figures of one simulated run, as the published evaluation reports them.
// Definitions (docs/simulator.md): JCT = end - submit of completed jobs; queueing delay
// = first launch - submit; execution time = sum over all attempts of (end - launch);
// slowdown = the successful attempt's duration / solo runtime (interference only);
// a preempted attempt is not a failed one.
#pragma once
#include <cstdint>
#include <string>

#include "sim/simulator.h"

namespace aegis {

struct RunMetrics {
  std::string policy;
  std::string trace;
  std::int64_t jobs = 0;
  std::int64_t completed = 0;
  std::int64_t stopped = 0;
  Seconds makespan_s = 0;  // last job end - first arrival
  Seconds jct_mean_s = 0, jct_p50_s = 0, jct_p95_s = 0;
  Seconds queue_mean_s = 0, queue_p95_s = 0;
  Seconds exec_total_s = 0;
  std::int64_t attempts = 0;
  std::int64_t failed_attempts = 0;
  std::int64_t oom_attempts = 0;
  std::int64_t neighbour_oom_attempts = 0;  // OOM deaths of jobs not placed last on their GPU
  std::int64_t mps_limit_attempts = 0;      // OOM deaths at a job's own MPS limit
  std::int64_t collocated_attempts = 0;  // attempts that shared a GPU at some point
  double slowdown_mean = 0, slowdown_max = 0;
  double energy_j = 0;
  double gpu_mem_util_mean = 0;
  double sm_util_mean = 0;
  // Each user's share of the charged GPU-seconds (a trace with users; fair share, issue 32).
  std::vector<std::pair<std::string, double>> user_shares;
  LabCounts lab;  // preemption and backfill, when on (issue 32): the run's own
};

RunMetrics summarize(const SimResult& r);

// Percentile (linear between closest ranks) of unsorted values; 0 when empty.
double percentile(std::vector<double> values, double q);

}  // namespace aegis
