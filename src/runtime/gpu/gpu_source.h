// Where the daemon's GPU facts come from: one call gives a sample of every GPU (memory,
// utilisation, processes, power, activity metrics where the driver has them). The NVML
// implementation loads libnvidia-ml with dlopen; pointed at the emulated library it
// drives emulated GPUs through exactly the same code.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu.h"
#include "core/units.h"

namespace aegis {

struct GpuProcess {
  std::uint32_t pid = 0;
  std::optional<MiB> used_mib;  // empty when the driver does not say
  std::optional<double> sm_util;  // its utilisation sample since the last read, [0,1] (GpuStatus::process_samples);
                                  // empty for an MPS client: the driver reports its work against its server
  bool mps_client = false;        // listed by nvmlDeviceGetMPSComputeRunningProcesses
};

// Where a device's SM activity, occupancy and DRAM activity came from (docs/daemon.md).
enum class ActivitySource { None, Gpm, Dcgm };

struct GpuStatus {
  int index = 0;                 // NVML index
  std::string uuid;              // "GPU-..." (or "MIG-..." for a MIG instance)
  std::string name;              // product name
  MiB total_mib = 0;
  MiB used_mib = 0;
  MiB free_mib = 0;
  std::optional<double> util;    // coarse utilisation, [0,1]
  std::optional<double> smact;   // SM activity, [0,1] (GPM, or DCGM's DCGM_FI_PROF_SM_ACTIVE)
  std::optional<double> smocc;   // SM occupancy, [0,1]
  std::optional<double> drama;   // DRAM bandwidth utilisation, [0,1]
  ActivitySource activity_from = ActivitySource::None;  // who gave smact, smocc and drama
  bool gpm = false;              // NVML GPM is read for this device (its first sample has no metrics yet)
  std::optional<double> power_w;
  std::optional<double> energy_j;  // since driver load
  bool mig_enabled = false;           // on a whole GPU: its MIG mode (then its instances are listed instead)
  std::string parent_uuid;            // on a MIG instance: the GPU it is cut from ("" for a whole GPU)
  std::string mig_profile;            // on a MIG instance: e.g. "3g.40gb"
  std::vector<GpuProcess> processes;  // compute processes
  bool process_samples = false;       // the driver gives per-process utilisation here: each process has sm_util

  // Which pressure rule the engine can apply to this GPU.
  TelemetryLevel level() const {
    if (smact && smocc && drama) return TelemetryLevel::Full;
    if (util) return TelemetryLevel::Coarse;
    return TelemetryLevel::MemoryOnly;
  }
  // The telemetry source the pressure filter's input comes from, as `aegis gpus` and the
  // metrics name it: "gpm", "dcgm", "coarse" (utilization.gpu) or "memory-only".
  const char* telemetry_source() const {
    switch (level()) {
      case TelemetryLevel::Full: return activity_from == ActivitySource::Dcgm ? "dcgm" : "gpm";
      case TelemetryLevel::Coarse: return "coarse";
      case TelemetryLevel::MemoryOnly: break;
    }
    return "memory-only";
  }
  // The engine's sample (missing metrics read 0).
  GpuSample sample() const { return {smact.value_or(0), smocc.value_or(0), drama.value_or(0), util.value_or(0)}; }
};

// What one sample reads besides the cheap calls (memory, utilisation, process lists, power,
// GPM: 1-90 us each). Two NVML calls cost milliseconds per GPU on a real driver (H200:
// per-process utilisation 1.4-2.6 ms, the energy counter 2.4-3.2 ms; docs/daemon.md, "What
// a sample costs"), so a caller asks for them only where it needs them. The default reads all.
struct SampleRequest {
  bool process_util_everywhere = true;    // per-process utilisation on every device,
  std::vector<std::string> process_util;  // else only on these devices (UUIDs)
  bool energy = true;                     // the energy counter (GpuStatus::energy_j)

  // Neither costly call (aegisd's request when no job awaits its first activity).
  static SampleRequest cheap() { return {false, {}, false}; }
  bool process_util_on(const std::string& uuid) const {
    if (process_util_everywhere) return true;
    for (const auto& u : process_util)
      if (u == uuid) return true;
    return false;
  }
};

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // One sample of every schedulable device, in NVML index order: a whole GPU, or, for a
  // GPU in MIG mode, each of its MIG instances (with its own UUID, memory and processes).
  // Reads per-process utilisation and energy only where `what` asks (the other devices'
  // `process_samples` is false and `energy_j` empty). Throws std::runtime_error if the
  // driver stops answering (the daemon retries). May be called from a thread other than
  // describe()'s (aegisd samples on its own thread), never from two at once.
  virtual std::vector<GpuStatus> sample(const SampleRequest& what) = 0;
  std::vector<GpuStatus> sample() { return sample(SampleRequest{}); }
  // Driver and library facts for logs and `aegis gpus`: "NVML 12.535.104 (libnvidia-ml.so.1), GPM: yes".
  virtual std::string describe() const = 0;
};

// Loads NVML from `library` ("libnvidia-ml.so.1" for the system driver, or a path such as
// the emulated library's) and initialises it. Returns null and sets `error` to one line
// saying what is missing (no library, no driver, init failed) when it cannot.
std::unique_ptr<GpuSource> open_nvml(const std::string& library, std::string* error);

}  // namespace aegis
