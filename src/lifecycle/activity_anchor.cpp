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
  // 1. Its own samples, where the driver keeps them: nothing else is as direct, so the
  // weaker rules below are not consulted (they could fire during a pause in loading).
  if (r.own_util) {
    if (*r.own_util >= s.process_util) return Found{t, Anchor::ProcessUtil};
    return std::nullopt;
  }
  // 2. The GPU's activity rising above what it was when the job's context appeared, while
  // no other new job could be the cause. While another new job waits there, its start
  // moves the GPU too: the level to rise above follows the GPU until the job is alone.
  if (!alone) g.baseline = gpu_activity;
  else if (gpu_activity && g.baseline && *gpu_activity >= *g.baseline + s.activity_rise)
    return Found{t, Anchor::GpuActivity};
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
