#include "sched/filters/filters.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace aegis {
namespace {

// Stage 2. The engine derives `observing` from the running jobs' launch and
// first-activity times (engine.cpp); this filter only enforces it.
class ObservationGate final : public Filter {
 public:
  std::string_view name() const override { return "observing"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    if (!g.observing) return true;
    // In seconds from now: the engine reads no clock, and the simulator's time is not a date.
    if (why)
      *why = std::isfinite(g.opens_at) ? fmt::format("a new job is observed; open in {:.0f} s", std::ceil(std::max(0.0, g.opens_at - r.now)))
                                       : std::string("a new job is observed until it shows activity");
    return false;
  }
  // A job added can only close the gate (it starts observed); memory and activity do not
  // open it. Time and a job's first activity do, which the monotone contract leaves to
  // wake_at and to drivers asking again at first activity: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Observation}}; }
  bool monotone() const override { return true; }
};

}  // namespace

std::unique_ptr<Filter> make_observation_gate(const EngineConfig&) { return std::make_unique<ObservationGate>(); }

}  // namespace aegis
