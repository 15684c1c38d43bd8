// An NVML library loaded with dlopen, its symbols resolved, nvmlInit done: the required
// symbols are non-null, optional ones are null where the library lacks them. Destroying
// it shuts NVML down and unloads the library. Used only by nvml_source.cpp.
#pragma once
#include <memory>
#include <string>

#include "runtime/gpu/dl_library.h"
#include "runtime/gpu/nvml_api.h"

namespace aegis::nvml {

class Library {
 public:
  // Null, with `error` set to one line, when the library cannot be loaded or initialised.
  static std::unique_ptr<Library> open(const std::string& path, std::string* error) {
    std::unique_ptr<Library> lib(new Library);
    auto start = [&] {
      const nvmlReturn_t rc = lib->init();
      return rc == NVML_SUCCESS ? std::string() : lib->error_string(rc);
    };
    if (!lib->dl_.load(path, "NVML", ": is the NVIDIA driver installed?", [&] { return lib->resolve(); }, start, error))
      return nullptr;
    lib->initialised_ = true;
    return lib;
  }

  ~Library() {
    if (initialised_) shutdown();  // then dl_ unloads the library
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const std::string& path() const { return dl_.path(); }

  std::string error_string(nvmlReturn_t rc) const {
    const char* s = errorString ? errorString(rc) : nullptr;
    return (s ? std::string(s) : "NVML error") + " (code " + std::to_string(rc) + ")";
  }

  // Required.
  nvmlInit_v2_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn errorString = nullptr;
  nvmlDeviceGetCount_v2_fn getCount = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn getHandleByIndex = nullptr;
  nvmlDeviceGetUUID_fn getUUID = nullptr;
  nvmlDeviceGetMemoryInfo_fn getMemoryInfo = nullptr;
  // Optional: null when absent.
  nvmlSystemGetDriverVersion_fn getDriverVersion = nullptr;
  nvmlSystemGetNVMLVersion_fn getNVMLVersion = nullptr;
  nvmlDeviceGetName_fn getName = nullptr;
  nvmlDeviceGetMemoryInfo_v2_fn getMemoryInfo_v2 = nullptr;
  nvmlDeviceGetUtilizationRates_fn getUtilizationRates = nullptr;
  nvmlDeviceGetComputeRunningProcesses_v3_fn getProcesses_v3 = nullptr;
  nvmlDeviceGetMPSComputeRunningProcesses_v3_fn getMpsProcesses_v3 = nullptr;  // optional
  nvmlDeviceGetComputeRunningProcesses_v2_fn getProcesses_v2 = nullptr;
  nvmlDeviceGetComputeRunningProcesses_fn getProcesses_v1 = nullptr;
  nvmlDeviceGetProcessUtilization_fn getProcessUtilization = nullptr;
  nvmlDeviceGetPowerUsage_fn getPowerUsage = nullptr;
  nvmlDeviceGetTotalEnergyConsumption_fn getTotalEnergyConsumption = nullptr;
  nvmlDeviceGetMigMode_fn getMigMode = nullptr;
  nvmlDeviceGetMaxMigDeviceCount_fn getMaxMigDeviceCount = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn getMigDeviceHandleByIndex = nullptr;
  nvmlDeviceGetGpuInstanceId_fn getGpuInstanceId = nullptr;
  nvmlGpmQueryDeviceSupport_fn gpmQueryDeviceSupport = nullptr;
  nvmlGpmSampleAlloc_fn gpmSampleAlloc = nullptr;
  nvmlGpmSampleFree_fn gpmSampleFree = nullptr;
  nvmlGpmSampleGet_fn gpmSampleGet = nullptr;
  nvmlGpmMetricsGet_fn gpmMetricsGet = nullptr;
  nvmlGpmMigSampleGet_fn gpmMigSampleGet = nullptr;

  bool has_gpm() const { return gpmQueryDeviceSupport && gpmSampleAlloc && gpmSampleFree && gpmSampleGet && gpmMetricsGet; }
  // Enough to list a MIG-mode GPU's instances (else it is reported whole, as before MIG).
  bool has_mig() const { return getMigMode && getMaxMigDeviceCount && getMigDeviceHandleByIndex; }

 private:
  Library() = default;

  template <class F>
  void find(F* out, const char* name) {
    *out = dl_.symbol<F>(name);
  }

  // The name of the first required symbol missing, or null.
  const char* resolve() {
    const char* missing = nullptr;
    auto need = [&](auto* out, const char* name) { dl_.need(out, name, missing); };
    need(&init, "nvmlInit_v2");
    need(&shutdown, "nvmlShutdown");
    need(&errorString, "nvmlErrorString");
    need(&getCount, "nvmlDeviceGetCount_v2");
    need(&getHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
    need(&getUUID, "nvmlDeviceGetUUID");
    need(&getMemoryInfo, "nvmlDeviceGetMemoryInfo");
    if (missing) return missing;
    find(&getDriverVersion, "nvmlSystemGetDriverVersion");
    find(&getNVMLVersion, "nvmlSystemGetNVMLVersion");
    find(&getName, "nvmlDeviceGetName");
    find(&getMemoryInfo_v2, "nvmlDeviceGetMemoryInfo_v2");
    find(&getUtilizationRates, "nvmlDeviceGetUtilizationRates");
    find(&getProcesses_v3, "nvmlDeviceGetComputeRunningProcesses_v3");
    find(&getMpsProcesses_v3, "nvmlDeviceGetMPSComputeRunningProcesses_v3");
    find(&getProcesses_v2, "nvmlDeviceGetComputeRunningProcesses_v2");
    find(&getProcesses_v1, "nvmlDeviceGetComputeRunningProcesses");
    find(&getProcessUtilization, "nvmlDeviceGetProcessUtilization");
    find(&getPowerUsage, "nvmlDeviceGetPowerUsage");
    find(&getTotalEnergyConsumption, "nvmlDeviceGetTotalEnergyConsumption");
    find(&getMigMode, "nvmlDeviceGetMigMode");
    find(&getMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount");
    find(&getMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex");
    find(&getGpuInstanceId, "nvmlDeviceGetGpuInstanceId");
    find(&gpmQueryDeviceSupport, "nvmlGpmQueryDeviceSupport");
    find(&gpmSampleAlloc, "nvmlGpmSampleAlloc");
    find(&gpmSampleFree, "nvmlGpmSampleFree");
    find(&gpmSampleGet, "nvmlGpmSampleGet");
    find(&gpmMetricsGet, "nvmlGpmMetricsGet");
    find(&gpmMigSampleGet, "nvmlGpmMigSampleGet");
    return nullptr;
  }

  DlLibrary dl_;
  bool initialised_ = false;
};

}  // namespace aegis::nvml
