// The slice of NVIDIA's NVML C API that aegis uses, declared by hand (no nvml.h ships in
// any package we can use), as nvtop does. Layouts follow NVIDIA's public NVML API
// reference; each struct says from which API version it is. Shared by the dlopen loader
// (function-pointer types) and the emulated library (which defines the functions).
#pragma once
#include <cstddef>

namespace aegis::nvml {

// nvmlReturn_t (values stable since NVML 1.0; later codes are only appended).
using nvmlReturn_t = int;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_LIBRARY_NOT_FOUND = 12;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25;  // NVML 11.6+
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

// Buffer sizes from nvml.h (the _V2 sizes are the larger, current ones).
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80;

// "Not available" marker for 64-bit counters such as usedGpuMemory: (unsigned long long)-1.
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;

inline constexpr unsigned NVML_DEVICE_MIG_DISABLE = 0;
inline constexpr unsigned NVML_DEVICE_MIG_ENABLE = 1;

// Opaque handles; only the library knows what they point to.
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlGpmSample_st;
using nvmlGpmSample_t = nvmlGpmSample_st*;

// nvmlMemory_t (NVML 1.0): bytes.
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlMemory_v2_t (NVML 11.6 / R510+): `reserved` is driver-reserved memory, not in `used`.
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct size with the version in the top byte.
inline constexpr unsigned int nvmlMemory_v2 = static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2U << 24U);

// nvmlUtilization_t (NVML 1.0): percent over the driver's last sample period.
// One per-process utilisation sample (nvmlDeviceGetProcessUtilization), percent of the
// sample period.
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp, microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

// nvmlProcessInfo_v1_t: what the unversioned nvmlDeviceGetComputeRunningProcesses writes
// (NVML up to 11.0).
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or NVML_VALUE_NOT_AVAILABLE
};

// nvmlProcessInfo_v2_t: what _v2 (NVML 11.x, R470+) writes; MIG instance ids added.
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;      // 0xFFFFFFFF when not on a MIG instance
  unsigned int computeInstanceId;
};

// What _v3 (NVML 11.6+, R510+) writes. Released drivers write the v2 layout (nvtop's
// finding); some nvml.h copies append `unsigned long long usedGpuCcProtectedMemory`, so
// the loader gives the driver room for that larger entry and reads entries at this stride.
using nvmlProcessInfo_v3_t = nvmlProcessInfo_v2_t;
struct nvmlProcessInfo_cc_t {  // the larger variant, only for sizing buffers
  nvmlProcessInfo_v2_t base;
  unsigned long long usedGpuCcProtectedMemory;
};

// GPM (GPU Performance Monitoring, NVML 12.0 / R520+, Hopper and later).
inline constexpr unsigned int NVML_GPM_METRIC_SM_UTIL = 2;
inline constexpr unsigned int NVML_GPM_METRIC_SM_OCCUPANCY = 3;
inline constexpr unsigned int NVML_GPM_METRIC_DRAM_BW_UTIL = 10;
// Size of nvmlGpmMetricsGet_t::metrics in NVML 12.0 to 12.3 (later headers raise it; the
// library reads only `numMetrics` entries, so a shorter array is still a valid request).
inline constexpr unsigned int NVML_GPM_METRIC_MAX = 98;
inline constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
inline constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;

// nvmlGpmMetric_t (NVML 12.0).
struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;  // per-metric status
  double value;             // percent for the utilisation metrics used here
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};

// nvmlGpmMetricsGet_t (NVML 12.0, version 1).
struct nvmlGpmMetricsGet_t {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;  // earlier sample
  nvmlGpmSample_t sample2;  // later sample
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
};

// nvmlGpmSupport_t (NVML 12.0, version 1).
struct nvmlGpmSupport_t {
  unsigned int version;
  unsigned int isSupportedDevice;
};

// Function types, one per symbol the loader resolves (the versioned name is the symbol).
using nvmlInit_v2_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t);
using nvmlSystemGetDriverVersion_fn = nvmlReturn_t (*)(char*, unsigned int);
using nvmlSystemGetNVMLVersion_fn = nvmlReturn_t (*)(char*, unsigned int);
using nvmlDeviceGetCount_v2_fn = nvmlReturn_t (*)(unsigned int*);
using nvmlDeviceGetHandleByIndex_v2_fn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using nvmlDeviceGetUUID_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetName_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetMemoryInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using nvmlDeviceGetMemoryInfo_v2_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
using nvmlDeviceGetUtilizationRates_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using nvmlDeviceGetComputeRunningProcesses_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
using nvmlDeviceGetComputeRunningProcesses_v2_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v2_t*);
using nvmlDeviceGetComputeRunningProcesses_v3_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v3_t*);
// Per-process utilisation samples newer than the last timestamp (microseconds); a null
// buffer asks for the count (NVML_ERROR_INSUFFICIENT_SIZE), NVML_ERROR_NOT_FOUND: none.
using nvmlDeviceGetProcessUtilization_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                                            unsigned long long);
// MPS clients (Volta and later): listed here, not among the compute processes.
using nvmlDeviceGetMPSComputeRunningProcesses_v3_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v3_t*);
using nvmlDeviceGetPowerUsage_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);                    // mW
using nvmlDeviceGetTotalEnergyConsumption_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);  // mJ
using nvmlDeviceGetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);  // current, pending
// MIG (NVML 11.0 / R450+): a GPU in MIG mode has up to `count` MIG device slots, some empty
// (NVML_ERROR_NOT_FOUND); a MIG device handle answers most device queries for its instance.
using nvmlDeviceGetMaxMigDeviceCount_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetMigDeviceHandleByIndex_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
using nvmlDeviceGetGpuInstanceId_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);  // on a MIG device handle
using nvmlGpmQueryDeviceSupport_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSupport_t*);
using nvmlGpmSampleAlloc_fn = nvmlReturn_t (*)(nvmlGpmSample_t*);
using nvmlGpmSampleFree_fn = nvmlReturn_t (*)(nvmlGpmSample_t);
using nvmlGpmSampleGet_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSample_t);
using nvmlGpmMetricsGet_fn = nvmlReturn_t (*)(nvmlGpmMetricsGet_t*);
// GPM of one MIG GPU instance: the parent GPU's handle and the instance's GPU instance id.
using nvmlGpmMigSampleGet_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlGpmSample_t);

}  // namespace aegis::nvml
