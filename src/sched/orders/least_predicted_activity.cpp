#include <utility>

#include "sched/orders/orders.h"

namespace aegis {
namespace {

// aegis-learned: the GPU whose jobs are predicted to keep it busy least first, their
// predicted coarse utilisations combined by the union rule, 1 - product(1 - u), which fits
// Lucid's measured pairs best (docs/estimators.md, "Additivity"). The newcomer multiplies
// every GPU's idle share by the same 1 - u, so the GPU's own jobs decide. Ties (GPUs whose
// jobs have no prediction count as busy) go to the most effective free memory, as MAGM.
class LeastPredictedActivity final : public Order {
 public:
  std::string_view name() const override { return "lpa"; }
  void sort(std::vector<const GpuCandidate*>& g, const PlacementRequest&, const EngineState&) const override {
    sort_by_key(g, [](const GpuCandidate& c) { return std::pair{-c.predicted_idle, -c.free_mib}; });
  }
  // Its jobs' predictions and the effective free memory; it ranks and drops nothing: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Jobs, GpuFact::Predictions, GpuFact::Memory}}; }
  bool monotone() const override { return true; }
  bool ranks_each_gpu_alone() const override { return true; }  // a key per GPU, ties by index
};

}  // namespace

std::unique_ptr<Order> make_least_predicted_activity_order(const EngineConfig&) {
  return std::make_unique<LeastPredictedActivity>();
}

}  // namespace aegis
