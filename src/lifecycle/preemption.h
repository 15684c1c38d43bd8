// Checkpoint-aware preemption (issue 32 item 1; docs/lab-policies.md, "Priorities and
// preemption"): which running jobs of lower priority levels a waiting head stops, and in
// what order. The lifecycle (preemption.cpp) warns them, stops them and requeues them;
// attempts younger than the engine's preempt_exempt_s (times preempt_exempt_growth for each
// earlier preemption of the job) are no candidates.
#pragma once
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "sched/config.h"

namespace aegis {

struct VictimCandidate {
  JobId id = 0;
  int priority = 0;
  Seconds seconds_at_risk = 0;  // since its resume point: its last checkpoint, else its attempt's start
  int gpus = 1;                 // the GPUs it holds
  // The work it would lose, in GPU-seconds: an 8-GPU job loses eight times what a 1-GPU
  // job started with it loses.
  double work_at_risk_gpu_s() const { return seconds_at_risk * gpus; }
};

// The rule: victims that lose the least work, in GPU-seconds, in all. Candidates are taken
// in the order of the work each would lose, least first (ties: the lower level, then the
// later job), until `fits` says the head would start without them; then each one the head
// can do without is given back, the most work first. Where the head needs many GPUs, that
// order can stop many small jobs where one large one would lose less in all (sixteen 1-GPU
// jobs of 990 s, 15,840 GPU-s, against one 16-GPU job of 900 s, 14,400), so the same is
// done in the order of the seconds at risk (the work lost per GPU freed; ties: fewer GPUs,
// then as above) and the set losing less work is chosen (equal: fewer victims, then the
// first order's). Empty when even all of them would not make room (nobody is stopped for
// nothing). `fits` is asked once when nobody is stopped, and when some are at most twice
// per candidate for each order (the second is skipped when it is the same order).
std::vector<JobId> choose_victims(std::vector<VictimCandidate> candidates,
                                  const std::function<bool(std::span<const JobId>)>& fits);

struct LifeJob;

// The start of the detail of an attempt stopped by preemption (persisted with it, so it
// survives a restart of aegisd); how many of a job's attempts before its current one were.
inline constexpr std::string_view kPreemptedFor = "preempted for job ";
int earlier_preemptions(const LifeJob& j);

// How long the current attempt of `j` is no victim: the engine's preempt_exempt_s times
// its preempt_exempt_growth for each time `j` was preempted before (growth 2, 600 s:
// 1,200 s after one preemption, 2,400 s after two). A job that is the only candidate is
// otherwise stopped each time it has run preempt_exempt_s (docs/lab-policies.md).
Seconds exempt_for(const LifeJob& j, const EngineConfig& config);

}  // namespace aegis
