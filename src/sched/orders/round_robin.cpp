#include "sched/orders/orders.h"

namespace aegis {
namespace {

// RR: the GPU after the one chosen last (EngineState::rr_cursor), wrapping around.
class RoundRobin final : public Order {
 public:
  std::string_view name() const override { return "rr"; }
  void sort(std::vector<const GpuCandidate*>& g, const PlacementRequest&, const EngineState& s) const override {
    int n = 0;
    for (const auto* c : g) n = std::max(n, c->view->index + 1);
    sort_by_key(g, [&](const GpuCandidate& c) { return (c.view->index - s.rr_cursor - 1 + 2 * n) % std::max(n, 1); });
  }
  // GPU indices and the engine's cursor; it ranks and drops nothing: monotone.
  StageReads reads() const override { return {}; }
  bool monotone() const override { return true; }
};

}  // namespace

std::unique_ptr<Order> make_round_robin_order(const EngineConfig&) { return std::make_unique<RoundRobin>(); }

}  // namespace aegis
