#include "sched/filters/filters.h"

namespace aegis {
namespace {

class ExclusiveGuard final : public Filter {
 public:
  std::string_view name() const override { return "exclusive"; }
  bool admits(const PlacementRequest&, const GpuCandidate& g) const override { return !g.has_exclusive; }
};

}  // namespace

std::unique_ptr<Filter> make_exclusive_guard() { return std::make_unique<ExclusiveGuard>(); }

}  // namespace aegis
