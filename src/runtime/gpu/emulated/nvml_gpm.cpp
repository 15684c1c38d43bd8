// GPM (GPU Performance Monitoring) of libaegis-nvml-emulated.so, as on Hopper: a sample
// holds a device's activity integrals at one instant; a metric is the mean over the span
// between two samples. A MIG instance is sampled through its GPU's handle and its GPU
// instance id (nvmlGpmMigSampleGet), its activity relative to its own SMs.
// AEGIS_EMULATED_GPM=0 plays older GPUs that have no GPM ("0,1": only GPU 0 lacks it).
#include <new>
#include <type_traits>

#include "runtime/gpu/emulated/call_cost.h"
#include "runtime/gpu/emulated/driver.h"

using namespace aegis::nvml;
using aegis::emu::device_index;
using aegis::emu::driver_options;
using aegis::emu::driver_state;
using aegis::emu::guarded;

namespace aegis::nvml {
struct nvmlGpmSample_st {
  int device = -1;  // -1 until filled by nvmlGpmSampleGet or nvmlGpmMigSampleGet
  double time_s = 0;
  aegis::emu::Activity integral;
  aegis::emu::Activity now;  // for two samples at one instant
};
}  // namespace aegis::nvml

namespace {

char kSmUtil[] = "SM_UTIL";
char kSmOcc[] = "SM_OCCUPANCY";
char kDramBw[] = "DRAM_BW_UTIL";
char kGrUtil[] = "GRAPHICS_UTIL";
char kPercent[] = "%";

using aegis::emu::Activity;

// The metrics the emulation has, and the activity each one means.
struct MetricDef {
  unsigned int id;
  double Activity::*field;
  char* name;
};
const MetricDef kMetrics[] = {
    {1, &Activity::util, kGrUtil},  // GRAPHICS_UTIL
    {NVML_GPM_METRIC_SM_UTIL, &Activity::smact, kSmUtil},
    {NVML_GPM_METRIC_SM_OCCUPANCY, &Activity::smocc, kSmOcc},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, &Activity::drama, kDramBw},
};

// Mean of one activity field between two samples, in percent.
double mean_percent(const nvmlGpmSample_st& a, const nvmlGpmSample_st& b, double Activity::*field) {
  const double dt = b.time_s - a.time_s;
  const double v = dt > 0 ? (b.integral.*field - a.integral.*field) / dt : b.now.*field;
  return 100 * (v < 0 ? 0 : v > 1 ? 1 : v);
}

nvmlReturn_t fill(int device, nvmlGpmSample_t sample) {
  if (!driver_options().has_gpm(device)) return NVML_ERROR_NOT_SUPPORTED;
  const auto r = driver_state()->read(device);
  *sample = {device, r.time_s, r.integral, r.activity};
  return NVML_SUCCESS;
}

}  // namespace

AEGIS_NVML_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  return guarded([&]() -> nvmlReturn_t {
    if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
    if (device_index(device) < 0 || !support) return NVML_ERROR_INVALID_ARGUMENT;
    if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    support->isSupportedDevice = driver_options().has_gpm(device_index(device)) ? 1 : 0;
    return NVML_SUCCESS;
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
  *sample = new (std::nothrow) nvmlGpmSample_st;
  return *sample ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
  delete sample;
  return NVML_SUCCESS;
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  aegis::emu::charge(aegis::emu::Call::GpmSampleGet);
  return guarded([&]() -> nvmlReturn_t {
    if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
    const int id = device_index(device);
    if (id < 0 || !sample) return NVML_ERROR_INVALID_ARGUMENT;
    if (aegis::emu::is_mig_device(id)) return NVML_ERROR_NOT_SUPPORTED;  // instances: nvmlGpmMigSampleGet
    return fill(id, sample);
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                                   nvmlGpmSample_t sample) {
  aegis::emu::charge(aegis::emu::Call::GpmSampleGet);
  return guarded([&]() -> nvmlReturn_t {
    using namespace aegis::emu;
    if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
    const int gpu = device_index(device);
    if (gpu < 0 || is_mig_device(gpu) || !sample) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig_mode(gpu)) return NVML_ERROR_NOT_SUPPORTED;
    for (int slot = 0; slot < kMigSlices; ++slot) {
      const int id = mig_device(gpu, slot);
      if (gpu_instance_id(slot) == gpuInstanceId && device_index(device_handle(id)) == id) return fill(id, sample);
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

AEGIS_NVML_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  if (!get) return NVML_ERROR_INVALID_ARGUMENT;
  if (get->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (!driver_state()) return NVML_ERROR_UNINITIALIZED;
  const nvmlGpmSample_st* a = get->sample1;
  const nvmlGpmSample_st* b = get->sample2;
  if (get->numMetrics > NVML_GPM_METRIC_MAX || !a || !b || a->device < 0 || a->device != b->device)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!driver_options().has_gpm(a->device)) return NVML_ERROR_NOT_SUPPORTED;
  for (unsigned int i = 0; i < get->numMetrics; ++i) {
    auto& m = get->metrics[i];
    const MetricDef* def = nullptr;
    for (const auto& d : kMetrics)
      if (d.id == m.metricId) def = &d;
    if (!def) {
      m = {m.metricId, NVML_ERROR_NOT_SUPPORTED, 0, {nullptr, nullptr, nullptr}};
      continue;
    }
    m.nvmlReturn = NVML_SUCCESS;
    m.value = mean_percent(*a, *b, def->field);
    m.metricInfo = {def->name, def->name, kPercent};
  }
  return NVML_SUCCESS;
}

static_assert(std::is_same_v<decltype(&nvmlGpmQueryDeviceSupport), nvmlGpmQueryDeviceSupport_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleAlloc), nvmlGpmSampleAlloc_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleFree), nvmlGpmSampleFree_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleGet), nvmlGpmSampleGet_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmMetricsGet), nvmlGpmMetricsGet_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmMigSampleGet), nvmlGpmMigSampleGet_fn>);
