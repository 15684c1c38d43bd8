#include "sched/filters/filters.h"

namespace aegis {
namespace {

// Stage 2. The engine derives `observing` from the running jobs' launch and
// first-activity times (engine.cpp); this filter only enforces it.
class ObservationGate final : public Filter {
 public:
  std::string_view name() const override { return "observing"; }
  bool admits(const PlacementRequest&, const GpuCandidate& g) const override { return !g.observing; }
};

}  // namespace

std::unique_ptr<Filter> make_observation_gate() { return std::make_unique<ObservationGate>(); }

}  // namespace aegis
