// The emulated NVML library's process-wide state: nvmlInit's reference count, the options
// read from the environment at the first nvmlInit, the opened shared state and the device
// handles (GPUs and MIG instances, by device id: device_ids.h). Internal to
// libaegis-nvml-emulated.so.
#pragma once
#include <cstdint>

#include "runtime/gpu/emulated/state.h"
#include "runtime/gpu/nvml_api.h"

namespace aegis::nvml {
// What an emulated device handle points to.
struct nvmlDevice_st {
  int id;  // device id: a GPU's index, or a MIG instance's id
};
}  // namespace aegis::nvml

namespace aegis::emu {

struct DriverOptions {
  // AEGIS_EMULATED_GPM: which GPUs have GPM metrics (Hopper-like; the others play Ampere
  // and older): "1" all, "0" none, or one 0/1 per GPU index, "0,1" (later GPUs take the last).
  std::uint64_t gpm = ~std::uint64_t{0};  // bit g: GPU g
  // Whether `device` (a GPU or, through its GPU, a MIG instance) has GPM.
  bool has_gpm(int device) const { return (gpm >> gpu_of(device)) & 1U; }
  int process_api = 3;         // AEGIS_EMULATED_PROCESS_API: newest process-listing API
  bool process_memory = true;  // AEGIS_EMULATED_PROCESS_MEMORY=0: per-process memory "not available"
  bool process_util = true;    // AEGIS_EMULATED_PROCESS_UTIL=0: nvmlDeviceGetProcessUtilization NOT_SUPPORTED
  bool call_costs = true;      // AEGIS_EMULATED_CALL_COSTS=0: calls cost nothing (call_cost.h; fast tests)
};

// Reads the environment and maps the state on the first call; counts later calls.
nvml::nvmlReturn_t driver_init();
nvml::nvmlReturn_t driver_shutdown();
// Why the last nvmlInit failed (shown by nvmlErrorString), or "".
const char* driver_init_detail();

// Null before nvmlInit (and after the last nvmlShutdown).
State* driver_state();
const DriverOptions& driver_options();
// GPUs enumerated at nvmlInit.
int device_count();
// The device id a handle names (a GPU or a MIG instance that existed at nvmlInit), or -1
// when the handle is not one of ours.
int device_index(nvml::nvmlDevice_t device);
nvml::nvmlDevice_t device_handle(int id);
// Whether `gpu` was in MIG mode at nvmlInit (a real driver also reads it once).
bool mig_mode(int gpu);

// Why this thread's last call failed with NVML_ERROR_GPU_IS_LOST (nvmlErrorString shows
// it, as init's detail), or "".
void set_call_detail(const char* why);
const char* call_detail();

// Runs `f` (returning an nvmlReturn_t) with no exception escaping into C callers. A state
// that cannot be reached (its lock held past the bounded wait, the file damaged: state.h)
// is NVML_ERROR_GPU_IS_LOST, which the loader takes as a failed sample whatever the call;
// nvmlErrorString then says why.
template <class F>
nvml::nvmlReturn_t guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const StateError& e) {
    set_call_detail(e.what());
    return nvml::NVML_ERROR_GPU_IS_LOST;
  } catch (...) {
    return nvml::NVML_ERROR_UNKNOWN;
  }
}

}  // namespace aegis::emu

#define AEGIS_NVML_EXPORT extern "C" __attribute__((visibility("default")))
