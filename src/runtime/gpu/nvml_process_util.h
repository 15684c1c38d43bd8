// Per-process utilisation samples (nvmlDeviceGetProcessUtilization) of one device: which
// of its processes ran kernels since the last read. aegisd anchors a job's observation
// window on them (lifecycle/activity_anchor.h). Used only by nvml_source.cpp.
#pragma once
#include <vector>

#include "runtime/gpu/gpu_source.h"
#include "runtime/gpu/nvml_api.h"

namespace aegis::nvml {

class ProcessUtilReader {
 public:
  // Sets `s.process_samples` when the driver gives samples on this device, and then each
  // listed process's `sm_util` (0 for one without a sample: it ran no kernel), except an MPS
  // client's: the driver reports its work against its server (aegisd attributes it). A driver
  // without the call (null `fn`) or answering NOT_SUPPORTED is not asked again.
  void read(nvmlDeviceGetProcessUtilization_fn fn, nvmlDevice_t device, GpuStatus& s);

 private:
  bool supported_ = true;
  unsigned long long last_seen_ = 0;  // newest sample read (microseconds): each is counted once
  std::vector<nvmlProcessUtilizationSample_t> buf_;
};

}  // namespace aegis::nvml
