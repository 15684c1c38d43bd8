#include "lifecycle/activity_anchor.h"

#include <array>
#include <cstdlib>
#include <utility>

namespace aegis {

namespace {
constexpr std::array<std::pair<Anchor, std::string_view>, 5> kNames{{{Anchor::None, ""},
                                                                     {Anchor::Reported, "reported"},
                                                                     {Anchor::ProcessUtil, "process-util"},
                                                                     {Anchor::GpuActivity, "gpu-activity"},
                                                                     {Anchor::MemoryPlateau, "memory-plateau"}}};
}  // namespace

std::string_view to_string(Anchor a) {
  for (const auto& [k, n] : kNames)
    if (k == a) return n;
  return "";
}

std::optional<Anchor> parse_anchor(std::string_view s) {
  for (const auto& [k, n] : kNames)
    if (n == s) return k;
  return std::nullopt;
}

std::optional<AnchorWatch::Found> AnchorWatch::observe(Seconds t, const JobGpuReading& r,
                                                       std::optional<double> gpu_activity, bool alone,
                                                       const AnchorSettings& s) {
  if (!context_at_) context_at_ = t;
  auto [it, first] = gpus_.try_emplace(r.gpu);
  PerGpu& g = it->second;
  if (first) {
    // The CUDA context: a few hundred MiB, and whatever the GPU did before this job.
    g.context_mib = r.mib;
    g.baseline = gpu_activity;
    g.level = r.mib;
    g.level_since = t;
  }
  // Activity counts once held for sustained_samples samples in a row, and then from the
  // first of them: PyTorch's warm-up (cuDNN autotuning, first compilations) shows single
  // samples of a few percent for seconds before the training loop (docs/daemon.md).
  const auto held = [&](bool active, Anchor kind) -> std::optional<Found> {
    if (!active) {
      g.run = 0;
      return std::nullopt;
    }
    if (g.run++ == 0) g.run_since = t;
    if (g.run >= s.sustained_samples) return Found{g.run_since, kind};
    return std::nullopt;
  };
  // 1. Its own samples, where the driver keeps them: nothing else is as direct, so the
  // weaker rules below are not consulted (they could fire during a pause in loading).
  if (r.own_util) return held(*r.own_util >= s.process_util, Anchor::ProcessUtil);
  // 2. The GPU's activity risen above what it was when the job's context appeared, while
  // no other new job could be the cause. While another new job waits there, its start
  // moves the GPU too: the level to rise above follows the GPU until the job is alone.
  if (!alone) {
    g.baseline = gpu_activity;
    g.run = 0;
  } else if (gpu_activity && g.baseline) {
    if (auto f = held(*gpu_activity >= *g.baseline + s.activity_rise, Anchor::GpuActivity)) return f;
  } else {
    g.run = 0;
  }
  // 3. A memory plateau: the job grew past its context (weights loaded, activations
  // allocated) and then held within the tolerance for plateau_s. It starts where the
  // memory settled, when the job reached its working set. A GPU saturated by others
  // (no rise can show) ends here too.
  if (std::llabs(r.mib - g.level) > s.plateau_tolerance_mib) {
    g.level = r.mib;
    g.level_since = t;
  }
  if (r.mib > g.context_mib + s.plateau_tolerance_mib && t - g.level_since >= s.plateau_s)
    return Found{g.level_since, Anchor::MemoryPlateau};
  return std::nullopt;
}

}  // namespace aegis
