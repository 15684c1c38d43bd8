#include "sched/filters/filters.h"

#include <fmt/format.h>

namespace aegis {
namespace {

// Stage 3. Full telemetry: exclude iff SMACT >= a AND (SMOCC >= b OR DRAMA >= c), each
// a risk score of the window. Coarse telemetry: keep iff utilisation risk < threshold.
// No activity metrics: keep (memory-only mode).
class PressureFilter final : public Filter {
 public:
  explicit PressureFilter(const EngineConfig& c)
      : w_(c.risk_weights), a_(c.smact_threshold), b_(c.smocc_threshold),
        c_(c.drama_threshold), util_(c.util_threshold) {}
  std::string_view name() const override { return "pressure"; }
  bool admits(const PlacementRequest&, const GpuCandidate& g, std::string* why) const override {
    using M = GpuCandidate::Metric;
    switch (g.view->level) {
      case TelemetryLevel::MemoryOnly: return true;
      case TelemetryLevel::Coarse: {
        if (g.risk(M::Util, w_) < util_) return true;
        if (why) *why = fmt::format("busy: utilisation risk {:.2f} >= {:.2f}", g.risk(M::Util, w_), util_);
        return false;
      }
      case TelemetryLevel::Full: {
        const bool busy = g.risk(M::SmAct, w_) >= a_ && (g.risk(M::SmOcc, w_) >= b_ || g.risk(M::Drama, w_) >= c_);
        if (!busy) return true;
        if (why) {
          const bool occ = g.risk(M::SmOcc, w_) >= b_;
          *why = fmt::format("busy: SM activity risk {:.2f} >= {:.2f} and {} risk {:.2f} >= {:.2f}", g.risk(M::SmAct, w_),
                             a_, occ ? "SM occupancy" : "DRAM activity", occ ? g.risk(M::SmOcc, w_) : g.risk(M::Drama, w_),
                             occ ? b_ : c_);
        }
        return false;
      }
    }
    return true;
  }
  // Only the window. Mean, median, p95 and EWMA each grow with every sample, the weights
  // are >= 0 (config.cpp), and both rules only exclude more as scores grow: more activity
  // never turns an exclusion into an admission: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Telemetry}}; }
  bool monotone() const override { return true; }

 private:
  RiskWeights w_;
  double a_, b_, c_, util_;
};

}  // namespace

std::unique_ptr<Filter> make_pressure_filter(const EngineConfig& c) {
  return std::make_unique<PressureFilter>(c);
}

}  // namespace aegis
