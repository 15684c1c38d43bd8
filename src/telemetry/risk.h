// Summaries of a telemetry window: mean, median, p95, EWMA, and the weighted "risk"
// that blends them, as the published system scores a GPU's recent activity.
#pragma once
#include <cstdint>
#include <span>

namespace aegis {

struct RiskWeights {
  double mean = 0.25;
  double median = 0.25;
  double p95 = 0.25;
  double ewma = 0.25;
};

struct WindowStats {
  double mean = 0;
  double median = 0;
  double p95 = 0;   // linear interpolation between closest ranks (numpy's default)
  double ewma = 0;  // alpha = 2/(n+1), seeded with the oldest sample, oldest to newest
};

// Stats of the samples, oldest first. An empty window gives all zeros.
WindowStats window_stats(std::span<const double> samples);

// A window told as runs of equal consecutive samples: `count` samples of `value`.
struct SampleRun {  // (no member initialisers: scratch arrays of runs stay uninitialised)
  double value;
  std::uint32_t count;
};

// Stats of the window the runs spell out, oldest first: bit for bit what window_stats()
// gives for the expanded samples (same sums in the same order), in time linear in the
// runs for the quantiles. Drivers that synthesise telemetry in steps (the simulator)
// summarise windows this way without building them. A window of one run, the most common
// (a steady GPU: 3 windows in 5 the simulator summarises), is told inline: every
// statistic of equal samples is their value, the all-equal case of the general one.
WindowStats window_stats_of_runs(std::span<const SampleRun> runs);
inline WindowStats window_stats(std::span<const SampleRun> runs) {
  if (runs.size() == 1 && runs[0].count > 0) {
    const double v = runs[0].value;
    return {v, v, v, v};
  }
  return window_stats_of_runs(runs);
}

// Weighted blend of the stats; 0 for an empty window. The blend of ready statistics is
// inline: the pressure filter takes it per GPU and metric, a call each.
double risk_score(std::span<const double> samples, const RiskWeights& w);
inline double risk_score(const WindowStats& s, const RiskWeights& w) {
  return w.mean * s.mean + w.median * s.median + w.p95 * s.p95 + w.ewma * s.ewma;
}

}  // namespace aegis
