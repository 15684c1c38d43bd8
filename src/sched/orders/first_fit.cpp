#include "sched/orders/orders.h"

namespace aegis {
namespace {

// FF: GPU index order.
class FirstFit final : public Order {
 public:
  std::string_view name() const override { return "ff"; }
  void sort(std::vector<const GpuCandidate*>& g, const PlacementRequest&, const EngineState&) const override {
    sort_by_key(g, [](const GpuCandidate&) { return 0; });
  }
  // GPU indices only; it ranks and drops nothing: monotone.
  StageReads reads() const override { return {}; }
  bool monotone() const override { return true; }
  bool ranks_each_gpu_alone() const override { return true; }  // a key per GPU, ties by index
};

}  // namespace

std::unique_ptr<Order> make_first_fit_order(const EngineConfig&) { return std::make_unique<FirstFit>(); }

}  // namespace aegis
