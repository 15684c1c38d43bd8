// Synthetic telemetry: each GPU's window of samples as the engine reads it, built from the
// GPU's activity history (world/physics.cpp writes it) only when a stage first reads it,
// with per-metric statistics kept until it changes; optional per-sample noise.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "sched/window_stats_source.h"
#include "sim/simulator.h"
#include "sim/world/state.h"

namespace aegis::simrun {

class TelemetryWindows {
 public:
  TelemetryWindows(ClusterState& st, const SimOptions& opt) : st_(st), opt_(opt) {}

  // Gives every server's placer its window source (when the engine reads telemetry).
  void attach();
  // The instant server s's engine is about to be asked at.
  void set_now(int s, Seconds t) {
    if (!lazy_.empty()) lazy_[static_cast<std::size_t>(s)]->now = t;
  }

  // One metric's statistics (0 SM activity, 1 SM occupancy, 2 DRAM activity, 3
  // utilisation) of a window kept as runs of equal samples.
  WindowStats stats_of_runs(const Runs& runs, int metric);
  // True if one of these GPUs of the server has a window that still changes after t.
  bool changing(const Server& srv, std::span<const int> locals, Seconds t) const;
  // True if, until the next event, every later window of these GPUs is at most the current
  // one sample by sample (see telemetry.cpp).
  bool falling(Server& srv, std::span<const int> locals, Seconds t);

 private:
  // One metric's statistics (0 SM activity, 1 SM occupancy, 2 DRAM activity, 3
  // utilisation) of GPU `local` of server s's window at t (LazyWindows).
  const WindowStats& stats(int s, int local, int metric, Seconds t);
  // A server's windows as the engine reads them (WindowStatsSource).
  class LazyWindows final : public WindowStatsSource {
   public:
    LazyWindows(TelemetryWindows& w, int server) : w_(w), server_(server) {}
    Seconds now = 0;
    const WindowStats& stats(int local, int metric) override;

   private:
    TelemetryWindows& w_;
    int server_;
  };

  // Builds GPU `local` of server `srv`'s window at time t unless the one it has still holds.
  void ensure_window(Server& srv, int local, Seconds t);
  static bool same_runs(const Runs& a, const Runs& b);
  bool still_valid(const Gpu& gpu, std::int64_t k_now, std::int64_t k_lo, int n, double hz) const;
  GpuSample noisy(GpuSample s, int g, std::int64_t k) const;

  ClusterState& st_;
  const SimOptions& opt_;
  std::vector<std::unique_ptr<LazyWindows>> lazy_;  // per server (its placer's window source)
  std::vector<SampleRun> metric_runs_;  // one metric of a window
  Runs noisy_runs_;                     // scratch of ensure_window
  Runs window_before_;                  // ensure_window: the runs it replaces
  Seconds sample_of_t_ = std::numeric_limits<Seconds>::quiet_NaN();  // ensure_window's last instant ...
  std::int64_t sample_k_ = 0;                                            // ... and its sample index
  std::int64_t first_sample_k_ = 0;                                      // ... and the run's first
};

}  // namespace aegis::simrun
