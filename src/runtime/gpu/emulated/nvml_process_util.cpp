// nvmlDeviceGetProcessUtilization for the emulated library: one sample per process that
// ran kernels (NVML reports only processes with non-zero utilisation in the period), with
// the process's share of the device now as its SM utilisation. NOT_SUPPORTED under
// AEGIS_EMULATED_PROCESS_UTIL=0 and on MIG, as on drivers and GPUs without it.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <iterator>

#include "runtime/gpu/emulated/driver.h"

using namespace aegis::nvml;
using aegis::emu::device_index;
using aegis::emu::driver_options;
using aegis::emu::driver_state;
using aegis::emu::guarded;
using aegis::emu::is_mig_device;

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                               nvmlProcessUtilizationSample_t* utilization,
                                                               unsigned int* count,
                                                               unsigned long long last_seen) {
  return guarded([&]() -> nvmlReturn_t {
    if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
    const int id = device_index(device);
    if (id < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!driver_options().process_util || is_mig_device(id) || aegis::emu::mig_mode(id))
      return NVML_ERROR_NOT_SUPPORTED;
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const unsigned long long now_us =
        static_cast<unsigned long long>(ts.tv_sec) * 1000000ULL + static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL;
    aegis::emu::ProcessEntry all[aegis::emu::kMaxProcesses];
    const std::size_t listed = std::min(driver_state()->processes(id, all), std::size(all));
    nvmlProcessUtilizationSample_t samples[aegis::emu::kMaxProcesses];
    unsigned int n = 0;
    for (std::size_t i = 0; i < listed; ++i) {
      const unsigned int percent = static_cast<unsigned int>(std::lround(100 * all[i].util));
      if (percent == 0 || now_us <= last_seen) continue;
      samples[n++] = {all[i].pid, now_us, percent, 0, 0, 0};
    }
    if (!utilization || *count < n) {
      *count = n;
      return n == 0 ? NVML_ERROR_NOT_FOUND : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n == 0) {
      *count = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    std::copy(samples, samples + n, utilization);
    *count = n;
    return NVML_SUCCESS;
  });
}
