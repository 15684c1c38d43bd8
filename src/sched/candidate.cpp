#include <array>
#include <vector>

#include "sched/snapshot.h"
#include "sched/stage.h"
#include "telemetry/risk.h"

namespace aegis {

double GpuCandidate::window_risk(Metric m, const RiskWeights& w) const {
  const auto& win = view->window;
  const std::size_t n = win.size();
  std::array<double, 64> small{};  // windows are 30 samples by default
  std::vector<double> big;
  double* buf = small.data();
  if (n > small.size()) {
    big.resize(n);
    buf = big.data();
  }
  for (std::size_t i = 0; i < n; ++i) {
    switch (m) {
      case Metric::SmAct: buf[i] = win[i].smact; break;
      case Metric::SmOcc: buf[i] = win[i].smocc; break;
      case Metric::Drama: buf[i] = win[i].drama; break;
      case Metric::Util: buf[i] = win[i].util; break;
    }
  }
  return risk_score(std::span<const double>(buf, n), w);
}

}  // namespace aegis
