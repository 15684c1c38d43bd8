// Runs many simulations on all cores (or `threads`), each with its own progress slot.
#pragma once
#include <functional>
#include <vector>

#include "sim/simulator.h"

namespace aegis::cli {

struct RunSpec {
  const WorkloadCatalog* catalog = nullptr;
  const Trace* trace = nullptr;
  SimOptions options;
};

// Results in the order of `runs`. Throws SimError naming the run if one fails.
std::vector<SimResult> run_all(std::vector<RunSpec>& runs, unsigned threads);

}  // namespace aegis::cli
