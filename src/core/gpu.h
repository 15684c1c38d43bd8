// One schedulable GPU as the engine sees it: capacity, reported free memory, how many
// processes run on it, and its recent telemetry samples (oldest first).
#pragma once
#include <span>
#include <string>

#include "core/units.h"

namespace aegis {

// One telemetry sample of a whole GPU, each field in [0,1].
struct GpuSample {
  double smact = 0;  // SM active (DCGM 1002 / GPM SM_UTIL)
  double smocc = 0;  // SM occupancy (DCGM 1003 / GPM SM_OCCUPANCY)
  double drama = 0;  // DRAM active (DCGM 1005 / GPM DRAM_BW_UTIL)
  double util = 0;   // coarse utilisation (nvidia-smi utilization.gpu)
};

// Which activity metrics a GPU can give; decides which pressure rule applies.
enum class TelemetryLevel {
  Full,        // SMACT, SMOCC, DRAMA available
  Coarse,      // only coarse utilisation
  MemoryOnly,  // no activity metrics at all: no pressure filter
};

struct GpuView {
  int index = 0;                      // position in the snapshot; decisions name GPUs by it
  std::string uuid;
  MiB total_mib = 0;
  MiB free_mib = 0;                   // as reported by the driver (or the simulator)
  int process_count = 0;              // compute processes seen on the GPU
  MiB foreign_mib = 0;                // held by processes of no job (never handed out, whatever the accounting)
  TelemetryLevel level = TelemetryLevel::Full;
  bool mig_instance = false;          // CUDA shows a process one MIG instance only: no multi-GPU jobs here
  std::span<const GpuSample> window;  // most recent samples, oldest first
};

}  // namespace aegis
