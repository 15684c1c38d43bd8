#include "sched/filters/filters.h"

namespace aegis {
namespace {

class ExclusiveGuard final : public Filter {
 public:
  std::string_view name() const override { return "exclusive"; }
  bool admits(const PlacementRequest&, const GpuCandidate& g, std::string* why) const override {
    if (!g.has_exclusive) return true;
    if (why) *why = "a job placed to run alone holds it";
    return false;
  }
  // Only whether a job on the GPU runs alone; a job added never clears that: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Jobs}}; }
  bool monotone() const override { return true; }
};

}  // namespace

std::unique_ptr<Filter> make_exclusive_guard(const EngineConfig&) { return std::make_unique<ExclusiveGuard>(); }

}  // namespace aegis
