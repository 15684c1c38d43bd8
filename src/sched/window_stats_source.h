// Where a tick's stages read a GPU's window statistics when the driver synthesises
// windows (Snapshot::window_stats): declared apart so that a candidate (stage.h) can ask
// it inline.
#pragma once
#include "telemetry/risk.h"

namespace aegis {

// The statistics of a GPU's telemetry window (one metric: 0 SM activity, 1 SM occupancy,
// 2 DRAM activity, 3 utilisation), for a driver that synthesises windows: it builds a
// window only when a stage reads it and remembers its statistics until it changes. The
// answer must equal window_stats() of GpuView::window as it would be built now.
class WindowStatsSource {
 public:
  virtual ~WindowStatsSource() = default;
  virtual const WindowStats& stats(int gpu_index, int metric) = 0;
};

}  // namespace aegis
