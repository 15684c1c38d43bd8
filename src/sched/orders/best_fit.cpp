#include "sched/orders/orders.h"

namespace aegis {
namespace {

// BF: packs load; the GPU with the least effective free memory that still fits first.
class BestFit final : public Order {
 public:
  std::string_view name() const override { return "bf"; }
  void sort(std::vector<const GpuCandidate*>& g, const PlacementRequest&, const EngineState&) const override {
    sort_by_key(g, [](const GpuCandidate& c) { return c.free_mib; });
  }
  // Effective free memory only; it ranks and drops nothing: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Memory}}; }
  bool monotone() const override { return true; }
  bool ranks_each_gpu_alone() const override { return true; }  // a key per GPU, ties by index
};

}  // namespace

std::unique_ptr<Order> make_best_fit_order(const EngineConfig&) { return std::make_unique<BestFit>(); }

}  // namespace aegis
