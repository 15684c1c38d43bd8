// DCGM's profiling fields (SM active 1002, SM occupancy 1003, DRAM active 1005) for the GPUs
// whose NVML has no GPM (Ampere and older), read from libdcgm loaded with dlopen: through
// a running nv-hostengine or a host engine embedded in this process. Values are DCGM's
// latest samples, ratios in [0,1]; a GPU DCGM has nothing for keeps its fields empty.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/gpu/gpu_source.h"

namespace aegis {

struct DcgmOptions {
  std::string mode = "auto";             // auto (hostengine if it answers, else embedded) | embedded | hostengine | off
  std::string library;                   // "" = libdcgm.so.4, then libdcgm.so.3, then libdcgm.so
  std::string hostengine = "127.0.0.1";  // nv-hostengine: HOST[:PORT], or a Unix socket path (starts with /)
  double update_s = 1.0;                 // how often DCGM samples the fields
};

class DcgmActivity {
 public:
  virtual ~DcgmActivity() = default;
  // Sets smact, smocc and drama (activity_from = Dcgm) of every device in `gpus` that DCGM
  // watches, by UUID, where it has a value; leaves the others as they are. Never throws:
  // a host engine that went away leaves the fields empty (the GPU reads coarse).
  virtual void fill(std::vector<GpuStatus>& gpus) = 0;
  // "libdcgm.so.4, embedded host engine, 2 GPUs" (and what went wrong since, if anything).
  virtual std::string describe() const = 0;
};

// Watches the profiling fields of the GPUs named by `uuids` (whole GPUs). Null, with
// `error` set to one line, when DCGM is off, missing, cannot connect, knows none of them,
// or cannot profile them.
std::unique_ptr<DcgmActivity> open_dcgm(const DcgmOptions& options, const std::vector<std::string>& uuids,
                                        std::string* error);

}  // namespace aegis
