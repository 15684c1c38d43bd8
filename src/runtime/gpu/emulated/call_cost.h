// What each NVML call costs on a real driver, charged by the emulated library so that the
// emulated path shows what a real one costs, and a count of every charged call (tests
// count calls, never time). Internal to libaegis-nvml-emulated.so; the counts leave it
// through aegisEmulatedNvmlCalls (nvml_exports.cpp). Table and provenance: call_cost.cpp.
#pragma once
#include <cstdint>

namespace aegis::emu {

enum class Call : int {
  MemoryInfo,         // nvmlDeviceGetMemoryInfo, _v2
  UtilizationRates,   // nvmlDeviceGetUtilizationRates
  ComputeProcesses,   // nvmlDeviceGetComputeRunningProcesses (every version)
  MpsProcesses,       // nvmlDeviceGetMPSComputeRunningProcesses_v3
  ProcessUtilization, // nvmlDeviceGetProcessUtilization
  PowerUsage,         // nvmlDeviceGetPowerUsage
  TotalEnergy,        // nvmlDeviceGetTotalEnergyConsumption
  MigMode,            // nvmlDeviceGetMigMode
  Uuid,               // nvmlDeviceGetUUID
  GpmSampleGet,       // nvmlGpmSampleGet, nvmlGpmMigSampleGet
  Count_,
};

// The call's NVML name ("nvmlDeviceGetProcessUtilization"), and its cost in microseconds.
const char* call_name(Call c);
double call_cost_us(Call c);
// Counts the call and, unless AEGIS_EMULATED_CALL_COSTS=0, waits its cost (a busy wait
// below 200 us, where a sleep would overshoot by the timer slack; a sleep above).
void charge(Call c);
// Calls of `name` since the library was loaded (an unknown name: 0).
std::uint64_t calls_of(const char* name);

}  // namespace aegis::emu
