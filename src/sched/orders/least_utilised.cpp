#include "sched/orders/orders.h"

namespace aegis {
namespace {

// LUG: the GPU with the lowest SM-activity risk first (coarse utilisation where SM
// activity is not available; memory-only GPUs all rank 0).
class LeastUtilised final : public Order {
 public:
  explicit LeastUtilised(const RiskWeights& w) : w_(w) {}
  std::string_view name() const override { return "lug"; }
  void sort(std::vector<const GpuCandidate*>& g, const PlacementRequest&, const EngineState&) const override {
    sort_by_key(g, [this](const GpuCandidate& c) {
      switch (c.view->level) {
        case TelemetryLevel::Full: return c.risk(GpuCandidate::Metric::SmAct, w_);
        case TelemetryLevel::Coarse: return c.risk(GpuCandidate::Metric::Util, w_);
        case TelemetryLevel::MemoryOnly: return 0.0;
      }
      return 0.0;
    });
  }
  // Telemetry windows only; it ranks and drops nothing: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Telemetry}}; }
  bool monotone() const override { return true; }
  bool ranks_each_gpu_alone() const override { return true; }  // a key per GPU, ties by index

 private:
  RiskWeights w_;
};

}  // namespace

std::unique_ptr<Order> make_least_utilised_order(const EngineConfig& c) {
  return std::make_unique<LeastUtilised>(c.risk_weights);
}

}  // namespace aegis
