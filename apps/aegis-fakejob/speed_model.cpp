#include "speed_model.h"

#include <algorithm>

namespace aegis::fakejob {

namespace {

// Alone on a fraction f of the SMs, a job busy a fraction u of its time spends
// (1 - u) + u / f as long per step.
double alone(double util, double f) { return f >= 1 ? 1.0 : 1.0 / ((1.0 - util) + util / f); }

}  // namespace

double speed_on_device(const InterferenceModel& model, const emu::Activity& self, const emu::CoRunners& others,
                       const DeviceShare& share) {
  const double own = alone(self.util, share.sm_fraction * share.thread_fraction);
  const double sliced = model.speed({self.util, self.drama}, others.util, others.drama);
  if (!share.mps) return own * sliced;
  const double saturation = std::max(1.0, (self.smact + others.smact) / share.sm_fraction);
  const double side_by_side = model.speed({0.0, self.drama}, 0.0, others.drama) / saturation;
  return own * std::max(sliced, side_by_side);
}

}  // namespace aegis::fakejob
