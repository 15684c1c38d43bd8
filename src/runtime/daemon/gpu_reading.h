// One sample of the daemon's GPUs as it reaches the daemon: the devices, or why the driver
// did not answer (then the daemon keeps its last good sample). Taken on aegisd's sampling
// thread (gpu_sampler.h) or, in tests and replays, by Daemon::tick itself.
#pragma once
#include <string>
#include <vector>

#include "runtime/gpu/gpu_source.h"

namespace aegis {

struct GpuReading {
  std::vector<GpuStatus> gpus;
  std::string error;      // non-empty: the sample failed
  SampleRequest asked;    // what it read (a device not asked has no per-process samples)
};

}  // namespace aegis
