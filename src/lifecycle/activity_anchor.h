// When a running job's observation window starts: at the start of its sustained GPU
// activity (a level held for some samples: real jobs run small warm-up kernels for seconds
// first), told from what a driver reads of its GPUs, most trusted first: the job's own
// utilisation samples; else its GPU's activity risen while it is the only job there not yet
// active; else its memory settling after it grew past its CUDA context. Pure: the daemon
// turns NVML readings into these, the lifecycle decides (docs/daemon.md, "The anchor").
#pragma once
#include <map>
#include <optional>
#include <string_view>

#include "core/units.h"

namespace aegis {

// Which evidence started an attempt's observation window.
enum class Anchor {
  None,           // not active yet
  Reported,       // the driver gave the time (the simulator knows it)
  ProcessUtil,    // its own per-process utilisation samples (nvmlDeviceGetProcessUtilization)
  GpuActivity,    // the GPU's activity rose while it was the only job there not yet active
  MemoryPlateau,  // its memory grew past its context and then held still
};
std::string_view to_string(Anchor a);
std::optional<Anchor> parse_anchor(std::string_view s);

// The job on one of its GPUs at one instant, where its processes show.
struct JobGpuReading {
  int gpu = 0;                     // engine index
  MiB mib = 0;                     // its processes' memory there (0 when the driver does not say)
  std::optional<double> own_util;  // its processes' utilisation samples, [0,1]; empty: none that are surely its own
};

// The thresholds: EngineConfig's anchor_* parameters (their defaults live there only).
struct AnchorSettings {
  double process_util;
  double activity_rise;
  int sustained_samples;  // consecutive samples at the level before it counts
  Seconds plateau_s;
  MiB plateau_tolerance_mib;
};

// One attempt's search for its anchor; fed every reading until it answers.
class AnchorWatch {
 public:
  struct Found {
    Seconds at = 0;
    Anchor anchor = Anchor::None;
  };
  // `gpu_activity`: the GPU's activity (SM active, else coarse utilisation), empty when the
  // driver has none; `alone`: no other job on that GPU waits for its anchor.
  std::optional<Found> observe(Seconds t, const JobGpuReading& r, std::optional<double> gpu_activity, bool alone,
                               const AnchorSettings& s);
  // When its first process was seen (CUDA context creation), if it was.
  std::optional<Seconds> context_at() const { return context_at_; }

 private:
  struct PerGpu {
    MiB context_mib = 0;               // memory when its process first showed there
    std::optional<double> baseline;    // the GPU's activity then (or last, while another new job waits there)
    MiB level = 0;                     // memory of the current plateau candidate
    Seconds level_since = 0;
    int run = 0;                       // consecutive samples at the activity level so far
    Seconds run_since = 0;             // the first of them
  };
  std::map<int, PerGpu> gpus_;
  std::optional<Seconds> context_at_;
};

}  // namespace aegis
