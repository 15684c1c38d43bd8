// How fast the emulated job runs on one device, relative to alone on a whole GPU: the
// simulator's rule (speed_of and device_speed in src/sim/simulator.cpp), so that a job
// here and its simulated twin slow down alike.
#pragma once
#include "runtime/gpu/emulated/state.h"
#include "sim/models/interference.h"

namespace aegis::fakejob {

struct DeviceShare {
  double sm_fraction = 1;      // a MIG instance's share of its GPU's SMs
  double thread_fraction = 1;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE / 100
  bool mps = false;            // an MPS client: kernels run side by side with the others'
};

// Speed of a job with solo activity `self` next to `others` (the other active processes
// on the device): a smaller share of the SMs stretches its busy time (1 - u) + u / f;
// neighbours slow it by the interference model (time slicing), or, under MPS, only once
// the SMs are saturated (and never more than time slicing would).
double speed_on_device(const InterferenceModel& model, const emu::Activity& self, const emu::CoRunners& others,
                       const DeviceShare& share);

}  // namespace aegis::fakejob
