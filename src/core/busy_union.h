// Coarse utilisation of co-located jobs: the share of time any kernel runs is the union
// of independent busy periods, 1 - (1 - u1)(1 - u2)...; closest to Lucid's measured pairs
// (docs/estimators.md, "Additivity"). The one formula of the simulator and the emulated GPU.
#pragma once
#include <algorithm>

namespace aegis {

// The idle share left when a job busy `u` of the time (capped at 1) joins a GPU idle
// `idle` of it; the busy share is 1 - idle.
inline double idle_after(double idle, double u) { return idle * (1.0 - std::min(1.0, u)); }

}  // namespace aegis
