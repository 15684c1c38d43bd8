// The NVML entry points of libaegis-nvml-emulated.so (MIG is in nvml_mig.cpp, GPM in
// nvml_gpm.cpp): the same symbols, signatures, return codes and struct versions as
// libnvidia-ml, answered from the shared state, so the loader cannot tell the two apart.
// A handle is a whole GPU or a MIG instance; each call answers for either as a driver
// does (what only a whole GPU has, such as power, is NOT_SUPPORTED on an instance).
#include <algorithm>
#include <map>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <type_traits>

#include "runtime/gpu/emulated/call_cost.h"
#include "runtime/gpu/emulated/driver.h"

using namespace aegis::nvml;
using aegis::emu::Call;
using aegis::emu::charge;
using aegis::emu::device_index;
using aegis::emu::driver_options;
using aegis::emu::driver_state;
using aegis::emu::guarded;
using aegis::emu::is_mig_device;

namespace {

constexpr const char* kDriverVersion = "0.0-aegis-emulated";
constexpr const char* kNvmlVersion = "12.0-aegis-emulated";
constexpr unsigned int kNoInstance = 0xFFFFFFFFU;  // gpuInstanceId off MIG

nvmlReturn_t copy_text(const char* text, char* out, unsigned int length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text, std::strlen(text) + 1);
  return NVML_SUCCESS;
}

unsigned long long bytes(aegis::MiB mib) { return static_cast<unsigned long long>(mib) << 20U; }

// The body of a device query: checks init and the handle, then runs `f(id)` with the
// handle's device id (a GPU or a MIG instance).
template <class F>
nvmlReturn_t on_device(nvmlDevice_t device, F&& f) {
  return guarded([&]() -> nvmlReturn_t {
    if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
    const int id = device_index(device);
    if (id < 0) return NVML_ERROR_INVALID_ARGUMENT;
    return f(id);
  });
}

// What a whole GPU reports and a MIG instance does not (power, energy).
template <class F>
nvmlReturn_t on_gpu(nvmlDevice_t device, F&& f) {
  return on_device(device,
                   [&](int id) -> nvmlReturn_t { return is_mig_device(id) ? NVML_ERROR_NOT_SUPPORTED : f(id); });
}

// The INSUFFICIENT_SIZE protocol of every nvmlDeviceGet*RunningProcesses version: with
// too small a buffer, say how many entries are needed and write none.
template <class Info>
nvmlReturn_t list_processes(nvmlDevice_t device, unsigned int* count, Info* infos, int api, bool mps = false) {
  charge(mps ? Call::MpsProcesses : Call::ComputeProcesses);
  if (api > driver_options().process_api) return NVML_ERROR_FUNCTION_NOT_FOUND;  // an older driver
  return on_device(device, [&](int id) -> nvmlReturn_t {
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    aegis::emu::ProcessEntry all[aegis::emu::kMaxProcesses], entries[aegis::emu::kMaxProcesses];
    // As the H200's driver (nvml-calls/): the compute list holds every process, MPS clients
    // included, and each MPS server serving this device (its own 66 MiB, which the device's
    // memory does not count here); the MPS list holds the clients alone.
    const std::size_t listed = std::min(driver_state()->processes(id, all), std::size(all));
    std::size_t n = 0;
    for (std::size_t i = 0; i < listed; ++i)
      if (!mps || all[i].mps_client) entries[n++] = all[i];
    for (std::size_t i = 0; i < listed && !mps; ++i) {
      const std::uint32_t server = all[i].mps_server;
      if (!all[i].mps_client || server == aegis::emu::kNoServer) continue;
      if (std::none_of(entries, entries + n, [&](const auto& e) { return e.pid == server; }))
        entries[n++] = {server, aegis::emu::kMpsServerMib, all[i].device, false, 0, 0.0};
    }
    if (*count < n) {
      *count = static_cast<unsigned int>(n);
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n > 0 && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    for (std::size_t i = 0; i < n; ++i) {
      Info info{};
      info.pid = entries[i].pid;
      info.usedGpuMemory = driver_options().process_memory ? bytes(entries[i].used_mib) : NVML_VALUE_NOT_AVAILABLE;
      if constexpr (requires { info.gpuInstanceId; }) {
        const bool mig = is_mig_device(entries[i].device);  // compute instance 0: the one per GPU instance
        info.gpuInstanceId = mig ? aegis::emu::gpu_instance_id(aegis::emu::slot_of(entries[i].device)) : kNoInstance;
        info.computeInstanceId = mig ? 0 : kNoInstance;
      }
      infos[i] = info;
    }
    *count = static_cast<unsigned int>(n);
    return NVML_SUCCESS;
  });
}

unsigned int percent(double v) { return static_cast<unsigned int>(std::lround(v * 100)); }

}  // namespace

AEGIS_NVML_EXPORT nvmlReturn_t nvmlInit_v2() { return guarded([] { return aegis::emu::driver_init(); }); }

AEGIS_NVML_EXPORT nvmlReturn_t nvmlShutdown() { return guarded([] { return aegis::emu::driver_shutdown(); }); }

AEGIS_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: {
      // Only init fails this way here: say why, which a real driver cannot.
      const char* d = aegis::emu::driver_init_detail();
      return *d ? d : "Driver Not Loaded";
    }
    case NVML_ERROR_GPU_IS_LOST: {
      // The state could not be reached (driver.h guarded): say why.
      const char* d = aegis::emu::call_detail();
      return *d ? d : "GPU is lost";
    }
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
  }
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
  return copy_text(kDriverVersion, version, length);
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return copy_text(kNvmlVersion, version, length);  // needs no init, as in NVML
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(aegis::emu::device_count());
  return NVML_SUCCESS;
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= static_cast<unsigned int>(aegis::emu::device_count())) return NVML_ERROR_INVALID_ARGUMENT;
  *device = aegis::emu::device_handle(static_cast<int>(index));
  return NVML_SUCCESS;
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  charge(Call::Uuid);
  return on_device(device, [&](int id) {
    using namespace aegis::emu;
    const std::string text = is_mig_device(id) ? emulated_mig_uuid(gpu_of(id), slot_of(id)) : emulated_uuid(id);
    return copy_text(text.c_str(), uuid, length);
  });
}

// An instance's name is its GPU's with the profile, as "NVIDIA A100-SXM4-40GB MIG 3g.20gb".
AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return on_device(device, [&](int id) { return copy_text(driver_state()->device(id).name.c_str(), name, length); });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  charge(Call::MemoryInfo);
  return on_device(device, [&](int id) -> nvmlReturn_t {
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    const auto r = driver_state()->read(id);
    *memory = {bytes(r.total_mib), bytes(r.total_mib - r.used_mib), bytes(r.used_mib)};
    return NVML_SUCCESS;
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  charge(Call::MemoryInfo);
  if (driver_options().process_api < 3) return NVML_ERROR_FUNCTION_NOT_FOUND;  // before NVML 11.6
  return on_device(device, [&](int id) -> nvmlReturn_t {
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const auto r = driver_state()->read(id);
    memory->total = bytes(r.total_mib);
    memory->reserved = 0;
    memory->free = bytes(r.total_mib - r.used_mib);
    memory->used = bytes(r.used_mib);
    return NVML_SUCCESS;
  });
}

// Not in MIG mode: neither an instance nor a GPU in MIG mode has coarse utilisation.
AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  charge(Call::UtilizationRates);
  return on_device(device, [&](int id) -> nvmlReturn_t {
    if (!utilization) return NVML_ERROR_INVALID_ARGUMENT;
    if (is_mig_device(id) || aegis::emu::mig_mode(id)) return NVML_ERROR_NOT_SUPPORTED;
    const auto r = driver_state()->read(id);
    *utilization = {percent(r.activity.util), percent(r.activity.drama)};
    return NVML_SUCCESS;
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                                     nvmlProcessInfo_v1_t* infos) {
  return list_processes(device, count, infos, 1);
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                                        nvmlProcessInfo_v2_t* infos) {
  return list_processes(device, count, infos, 2);
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                                        nvmlProcessInfo_v3_t* infos) {
  return list_processes(device, count, infos, 3);
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                                           nvmlProcessInfo_v3_t* infos) {
  return list_processes(device, count, infos, 3, true);
}

// nvmlDeviceGetProcessUtilization: one sample per process that ran kernels (NVML reports
// only processes with non-zero utilisation in the period), with the process's share of the
// device now as its SM utilisation. NOT_SUPPORTED under AEGIS_EMULATED_PROCESS_UTIL=0 and
// on MIG, as on drivers and GPUs without it.
AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                               nvmlProcessUtilizationSample_t* utilization,
                                                               unsigned int* count,
                                                               unsigned long long last_seen) {
  charge(Call::ProcessUtilization);  // as dear when it answers NOT_FOUND (H200: 2.6 ms)
  return on_device(device, [&](int id) -> nvmlReturn_t {
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!driver_options().process_util || is_mig_device(id) || aegis::emu::mig_mode(id))
      return NVML_ERROR_NOT_SUPPORTED;
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const unsigned long long now_us =
        static_cast<unsigned long long>(ts.tv_sec) * 1000000ULL + static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL;
    aegis::emu::ProcessEntry all[aegis::emu::kMaxProcesses];
    const std::size_t listed = std::min(driver_state()->processes(id, all), std::size(all));
    // Under MPS the driver reports every client's work against its server's pid, never the
    // client's (nvml-calls/ of the H200 run): a server's sample is the union of its clients'
    // busy time, as a device's utilisation is (1 - prod(1 - u)).
    std::map<std::uint32_t, double> idle;  // pid -> share of time none of its work ran
    for (std::size_t i = 0; i < listed; ++i) {
      if (all[i].mps_client && all[i].mps_server == aegis::emu::kNoServer) continue;
      const std::uint32_t pid = all[i].mps_client ? all[i].mps_server : all[i].pid;
      idle.try_emplace(pid, 1.0).first->second *= 1 - all[i].util;
    }
    nvmlProcessUtilizationSample_t samples[aegis::emu::kMaxProcesses];
    unsigned int n = 0;
    for (const auto& [pid, none] : idle) {
      const unsigned int percent = static_cast<unsigned int>(std::lround(100 * (1 - none)));
      if (percent == 0 || now_us <= last_seen) continue;
      samples[n++] = {pid, now_us, percent, 0, 0, 0};
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

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  charge(Call::PowerUsage);
  return on_gpu(device, [&](int id) -> nvmlReturn_t {
    if (!milliwatts) return NVML_ERROR_INVALID_ARGUMENT;
    *milliwatts = static_cast<unsigned int>(std::lround(driver_state()->read(id).power_w * 1000));
    return NVML_SUCCESS;
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* millijoules) {
  charge(Call::TotalEnergy);
  return on_gpu(device, [&](int id) -> nvmlReturn_t {
    if (!millijoules) return NVML_ERROR_INVALID_ARGUMENT;
    *millijoules = static_cast<unsigned long long>(std::llround(driver_state()->read(id).energy_j * 1000));
    return NVML_SUCCESS;
  });
}

// Not NVML: how many times the named NVML call was made in this process (call_cost.h), for
// tests that count calls. libnvidia-ml has no such symbol; the loader never asks for it.
AEGIS_NVML_EXPORT unsigned long long aegisEmulatedNvmlCalls(const char* function) {
  return aegis::emu::calls_of(function);
}

// Each definition has exactly the type the loader casts its symbol to.
static_assert(std::is_same_v<decltype(&nvmlInit_v2), nvmlInit_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlShutdown), nvmlShutdown_fn>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), nvmlErrorString_fn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetDriverVersion), nvmlSystemGetDriverVersion_fn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetNVMLVersion), nvmlSystemGetNVMLVersion_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), nvmlDeviceGetCount_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), nvmlDeviceGetHandleByIndex_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUUID), nvmlDeviceGetUUID_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetName), nvmlDeviceGetName_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo), nvmlDeviceGetMemoryInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo_v2), nvmlDeviceGetMemoryInfo_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUtilizationRates), nvmlDeviceGetUtilizationRates_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses), nvmlDeviceGetComputeRunningProcesses_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v2), nvmlDeviceGetComputeRunningProcesses_v2_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v3), nvmlDeviceGetComputeRunningProcesses_v3_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMPSComputeRunningProcesses_v3),
                             nvmlDeviceGetMPSComputeRunningProcesses_v3_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerUsage), nvmlDeviceGetPowerUsage_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTotalEnergyConsumption), nvmlDeviceGetTotalEnergyConsumption_fn>);
