// MIG of libaegis-nvml-emulated.so: the mode (only ever read; nothing here changes it, as
// aegis never does), and the MIG device handles of a GPU in MIG mode, which the other
// device calls then answer for their instance (nvml_exports.cpp). Layouts come from
// AEGIS_EMULATED_MIG at nvmlInit (mig_spec.h).
#include <type_traits>

#include "runtime/gpu/emulated/call_cost.h"
#include "runtime/gpu/emulated/driver.h"

using namespace aegis::nvml;
using aegis::emu::device_index;
using aegis::emu::driver_state;
using aegis::emu::guarded;
using aegis::emu::is_mig_device;

namespace {

// The body of a query that only a whole GPU's handle answers.
template <class F>
nvmlReturn_t on_parent(nvmlDevice_t device, F&& f) {
  return guarded([&]() -> nvmlReturn_t {
    if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
    const int id = device_index(device);
    if (id < 0 || is_mig_device(id)) return NVML_ERROR_INVALID_ARGUMENT;
    return f(id);
  });
}

}  // namespace

// Every emulated GPU is MIG-capable (as an A100 or H100); AEGIS_EMULATED_MIG says which are on.
AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current, unsigned int* pending) {
  aegis::emu::charge(aegis::emu::Call::MigMode);
  return on_parent(device, [&](int gpu) -> nvmlReturn_t {
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = aegis::emu::mig_mode(gpu) ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return on_parent(device, [&](int) -> nvmlReturn_t {
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = aegis::emu::kMigSlices;
    return NVML_SUCCESS;
  });
}

// Slot `index` of the layout; NOT_FOUND for an empty slot or a GPU off MIG mode.
AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                                   nvmlDevice_t* migDevice) {
  return on_parent(device, [&](int gpu) -> nvmlReturn_t {
    if (!migDevice || index >= static_cast<unsigned int>(aegis::emu::kMigSlices)) return NVML_ERROR_INVALID_ARGUMENT;
    const int id = aegis::emu::mig_device(gpu, static_cast<int>(index));
    if (!aegis::emu::mig_mode(gpu) || device_index(aegis::emu::device_handle(id)) != id) return NVML_ERROR_NOT_FOUND;
    *migDevice = aegis::emu::device_handle(id);
    return NVML_SUCCESS;
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return guarded([&]() -> nvmlReturn_t {
    if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
    const int d = device_index(device);
    if (d < 0 || !id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!is_mig_device(d)) return NVML_ERROR_NOT_SUPPORTED;
    *id = aegis::emu::gpu_instance_id(aegis::emu::slot_of(d));
    return NVML_SUCCESS;
  });
}

static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigMode), nvmlDeviceGetMigMode_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMaxMigDeviceCount), nvmlDeviceGetMaxMigDeviceCount_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigDeviceHandleByIndex), nvmlDeviceGetMigDeviceHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceId), nvmlDeviceGetGpuInstanceId_fn>);
