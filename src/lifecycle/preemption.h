// Checkpoint-aware preemption (issue 32 item 1; docs/lab-policies.md, "Priorities and
// preemption"): which running jobs of lower priority levels a waiting head stops, and in
// what order. The lifecycle (preemption.cpp) warns them, stops them and requeues them;
// attempts younger than the engine's preempt_exempt_s are no candidates.
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "core/units.h"

namespace aegis {

struct VictimCandidate {
  JobId id = 0;
  int priority = 0;
  Seconds work_at_risk = 0;  // since its last checkpoint, else since its attempt started
};

// The rule: candidates in the order of the work they would lose, least first (ties: the
// lower level, then the later job), taken until `fits` says the head would start without
// them; then each one the head can do without is given back, the most work first. Empty
// when even all of them would not make room (nobody is stopped for nothing). `fits` is
// asked once when nobody is stopped, at most twice per candidate when some are.
std::vector<JobId> choose_victims(std::vector<VictimCandidate> candidates,
                                  const std::function<bool(std::span<const JobId>)>& fits);

}  // namespace aegis
