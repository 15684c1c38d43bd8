// How an emulated job slows down next to others on an emulated GPU (docs/emulated-gpu.md,
// "Contention"). This is the emulated GPU's own model: another form than the simulator's
// interference model (src/sim/models/interference.h), fitted on other measurements
// (Gavel's V100 pairs, not Lucid's RTX 3090 pairs), in other code. aegisd on emulated GPUs
// and the simulator are therefore two models of contention that can disagree.
//
// Time slicing (no MPS): a job alternates host phases and GPU phases; alone on a whole GPU
// it spends a fraction u (its solo utilisation) of its time in GPU phases. Next to
// co-runners whose solo utilisations sum to U, each of its GPU phases costs
// (1 + timeslice_overhead * min(1, U)) as long (context switches and refilled caches, in
// proportion to how often a co-runner holds the GPU), and stretches further by u + U when
// the processes together ask for more than the GPU's time (round-robin sharing):
//     speed = 1 / ((1 - u) + u * (1 + k * min(1, U)) * max(1, u + U))
// MPS (kernels side by side): no time-slice overhead; a job slows only when the SMs or the
// DRAM bandwidth are oversubscribed, never more than under time slicing:
//     speed = max(time-sliced speed, 1 / max(1, (s + S) / f, d + D))
// with s, S its own and its co-runners' SM activity, d, D their DRAM activity and f the
// device's share of the SMs.
// A smaller share of the SMs (a MIG instance, an MPS thread percentage) stretches a job's
// busy time alone: speed (1 - u) + u / f, the same physical rule the simulator uses.
#pragma once
#include <span>
#include <string_view>
#include <vector>

#include "core/param_table.h"
#include "runtime/gpu/emulated/state.h"

namespace aegis::emu {

struct ContentionConfig {
  // k above: the cost of time slicing per GPU phase, next to co-runners that together keep
  // the GPU busy. Fitted on Gavel's measured V100 pairs (`aegis calibrate --emulated`;
  // tests/test_fakejob.cpp checks the fit reproduces it).
  double timeslice_overhead = 2.30;
};

std::span<const ParamEntry<ContentionConfig>> contention_param_table();
std::vector<ParamInfo> describe(const ContentionConfig& c);
// "name=value[,name=value...]" (the AEGIS_EMULATED_CONTENTION variable); all or nothing.
// Throws ConfigError naming the bad part.
void set_params(ContentionConfig& c, std::string_view text);

// Speed, relative to alone on a whole GPU, of a job with solo utilisation `util` time-sliced
// with co-runners of summed solo utilisation `others_util` (1 with none).
double timesliced_speed(const ContentionConfig& c, double util, double others_util);

// Where a job runs: its share of the SMs and whether it is an MPS client.
struct DeviceShare {
  double sm_fraction = 1;      // a MIG instance's share of its GPU's SMs
  double thread_fraction = 1;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE / 100
  bool mps = false;            // an MPS client: kernels run side by side with the others'
};

// Speed of a job with solo activity `self` next to `others` (the other active processes on
// its device), by the rules above.
double speed_on_device(const ContentionConfig& c, const Activity& self, const CoRunners& others,
                       const DeviceShare& share);

}  // namespace aegis::emu
