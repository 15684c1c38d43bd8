#include <array>
#include <vector>

#include "sched/stage.h"
#include "telemetry/risk.h"

namespace aegis {

const GpuCandidate::Risks& GpuCandidate::risks(const RiskWeights& w) const {
  if (risks_) return *risks_;
  const auto& win = view->window;
  const std::size_t n = win.size();
  std::array<double, 4 * 64> small{};  // windows are 30 samples by default
  std::vector<double> big;
  double* buf = small.data();
  if (n > 64) {
    big.resize(4 * n);
    buf = big.data();
  }
  for (std::size_t i = 0; i < n; ++i) {
    buf[i] = win[i].smact;
    buf[n + i] = win[i].smocc;
    buf[2 * n + i] = win[i].drama;
    buf[3 * n + i] = win[i].util;
  }
  auto part = [&](std::size_t k) { return std::span<const double>(buf + k * n, n); };
  Risks r;
  r.smact = risk_score(part(0), w);
  r.smocc = risk_score(part(1), w);
  r.drama = risk_score(part(2), w);
  r.util = risk_score(part(3), w);
  risks_ = r;
  return *risks_;
}

}  // namespace aegis
