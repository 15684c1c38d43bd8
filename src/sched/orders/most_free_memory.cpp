#include "sched/orders/orders.h"

namespace aegis {
namespace {

// MAGM: spreads load; the GPU with the most effective free memory first.
class MostFreeMemory final : public Order {
 public:
  std::string_view name() const override { return "magm"; }
  void sort(std::vector<const GpuCandidate*>& g, const PlacementRequest&, const EngineState&) const override {
    sort_by_key(g, [](const GpuCandidate& c) { return -c.free_mib; });
  }
  // Effective free memory only; it ranks and drops nothing: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Memory}}; }
  bool monotone() const override { return true; }
  bool ranks_each_gpu_alone() const override { return true; }  // a key per GPU, ties by index
};

}  // namespace

std::unique_ptr<Order> make_most_free_memory_order(const EngineConfig&) {
  return std::make_unique<MostFreeMemory>();
}

}  // namespace aegis
