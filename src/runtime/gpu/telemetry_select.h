// The daemon's GPU source with its telemetry chosen per GPU: NVML for memory, processes and
// utilisation; SM activity, occupancy and DRAM activity from NVML GPM where the GPU has it
// (Hopper and later), else from DCGM's profiling fields (Ampere and older datacenter GPUs),
// else the GPU reads coarse (utilization.gpu) or memory only. GpuStatus::telemetry_source()
// says which, per sample.
#pragma once
#include <memory>
#include <string>

#include "runtime/gpu/dcgm_source.h"
#include "runtime/gpu/gpu_source.h"

namespace aegis {

// Opens NVML from `nvml_library` (null, with `error` set, when it cannot: see open_nvml),
// then DCGM for the whole GPUs without GPM. DCGM missing or refusing is no error: those
// GPUs read coarse, and describe() says why. `dcgm_everywhere` (aegis-gpu-query's
// --source dcgm, to compare the two on one GPU) watches every whole GPU with DCGM and lets
// its values replace GPM's.
std::unique_ptr<GpuSource> open_gpus(const std::string& nvml_library, const DcgmOptions& dcgm, std::string* error,
                                     bool dcgm_everywhere = false);

}  // namespace aegis
