// aegis-fakejob's command line: the emulated job's memory, activity and solo duration.
// Defaults follow the simulator's workload conventions (smocc and drama half of smact).
#pragma once
#include <string>

#include "core/units.h"
#include "runtime/gpu/emulated/state.h"

namespace aegis::fakejob {

struct Options {
  MiB mem_mib = 0;
  double seconds = 0;      // solo duration: the work, in seconds at speed 1
  double ramp_s = 0;       // memory reaches mem_mib this long after the first allocation
  double startup_s = 2;    // before the first CUDA call (data loading)
  // A real job's first steps on the GPU: its CUDA context appears with context_mib, the
  // model loads for load_s (memory grows to loaded_mib, no kernel runs), then training
  // starts and memory reaches mem_mib. Both 0: everything at once, as before.
  MiB context_mib = 0;
  double load_s = 0;
  MiB loaded_mib = 0;      // 0: mem_mib
  // While loading, real PyTorch jobs run small kernels (cuDNN autotuning, the first
  // allocations): SM activity 0.00-0.12 on the H200 for 5-11 s before training. 0: none.
  emu::Activity load_activity;
  emu::Activity activity;  // solo activity on each of its GPUs
};

inline constexpr const char* kUsage =
    "usage: aegis-fakejob --mem MIB --smact F --seconds S [--ramp R] [--smocc F] [--drama F] [--util F] [--startup D]\n"
    "       [--context MIB] [--load S] [--loaded MIB] [--load-smact F]\n"
    "  an emulated training job on the emulated GPUs named by CUDA_VISIBLE_DEVICES (indices, GPU or MIG\n"
    "  UUIDs; GPU 0 when unset), state in AEGIS_EMULATED_STATE (docs/emulated-gpu.md); an MPS client\n"
    "  when CUDA_MPS_PIPE_DIRECTORY is set (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE);\n"
    "  AEGIS_EMULATED_CONTENTION=NAME=VALUE,... overrides the contention model's parameters\n"
    "  --mem MIB      memory held on every GPU (reached over --ramp seconds, default at once)\n"
    "  --smact F      SM activity alone, [0,1]; --smocc and --drama default to F/2, --util to min(1, 1.2 F)\n"
    "  --seconds S    duration alone; co-located jobs slow it down (the emulated GPU's contention model)\n"
    "  --startup D    seconds before the first allocation (default 2)\n"
    "  --context MIB  the CUDA context's memory, shown first (default 0: none)\n"
    "  --load S       seconds of model loading after the context: memory grows to --loaded, no kernel runs\n"
    "  --loaded MIB   memory when loading ends (default --mem); training then takes it to --mem\n"
    "  --load-smact F SM activity while loading (small warm-up kernels; default 0: none)\n";

// False, with `error` set to one line, for bad or missing arguments.
bool parse_options(int argc, const char* const* argv, Options* out, std::string* error);

}  // namespace aegis::fakejob
