#include "sched/orders/orders.h"

namespace aegis {
namespace {

// Horus: the GPU whose profiled utilisation, with the new job added, is lowest first.
// The new job adds the same amount everywhere, so the sum of the GPU's jobs decides.
class LeastProjectedUtil final : public Order {
 public:
  std::string_view name() const override { return "lpu"; }
  void sort(std::vector<const GpuCandidate*>& g, const PlacementRequest&, const EngineState&) const override {
    sort_by_key(g, [](const GpuCandidate& c) { return c.util_sum; });
  }
  // The GPU's jobs' utilisation sum (not the new job's: it adds the same everywhere); it
  // ranks and drops nothing: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Jobs}}; }
  bool monotone() const override { return true; }
  bool ranks_each_gpu_alone() const override { return true; }  // a key per GPU, ties by index
};

}  // namespace

std::unique_ptr<Order> make_least_projected_util_order(const EngineConfig&) {
  return std::make_unique<LeastProjectedUtil>();
}

}  // namespace aegis
