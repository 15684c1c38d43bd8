// libaegis-dcgm-emulated.so: a libdcgm look-alike over the emulated GPUs' shared state
// (state.h), so that DCGM's profiling fields are the emulated GPUs' activity, exactly the
// activity the emulated NVML's GPM reports. The symbols, signatures and return codes are
// DCGM's (dcgm_api.h); what it models:
// - a host engine embedded (dcgmStartEmbedded) or reached by address (dcgmConnect_v2: only
//   AEGIS_EMULATED_DCGM_HOSTENGINE's address answers, as if nv-hostengine listened there);
// - DCGM's own GPU ids (the emulated GPU index) and each GPU's UUID (field 54);
// - watches: a field not watched on a GPU reads blank with DCGM_ST_NOT_WATCHED;
// - profiling (fields 1002, 1003, 1005): the GPU's measured activity now, as a ratio;
//   AEGIS_EMULATED_DCGM_PROFILING=0 plays GPUs DCGM cannot profile (consumer GPUs), whose
//   watch fails with DCGM_ST_PROFILING_NOT_SUPPORTED.
// AEGIS_EMULATED_STATE names the state file, as for the emulated NVML.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/gpu/dcgm_api.h"
#include "runtime/gpu/emulated/state.h"

#define AEGIS_DCGM_EXPORT extern "C" __attribute__((visibility("default")))

using namespace aegis::dcgm;

namespace {

// Process-wide, like the real library's host engine: guarded by g_mu.
std::mutex g_mu;
bool g_initialised = false;
std::unique_ptr<aegis::emu::State> g_state;  // opened with the first host engine
std::set<dcgmHandle_t> g_handles;
dcgmHandle_t g_next_handle = 1;
std::map<dcgmGpuGrp_t, std::vector<int>> g_groups;  // GPU groups (DCGM_GROUP_ALL_GPUS is implicit)
std::map<dcgmFieldGrp_t, std::pair<std::string, std::vector<unsigned short>>> g_field_groups;  // name, fields
std::uintptr_t g_next_id = 1;
std::set<std::pair<int, unsigned short>> g_watched;  // (GPU, field)

bool is_profiling(unsigned short f) {
  return f == DCGM_FI_PROF_SM_ACTIVE || f == DCGM_FI_PROF_SM_OCCUPANCY || f == DCGM_FI_PROF_DRAM_ACTIVE;
}

bool switch_off(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

int gpu_count() { return g_state ? g_state->gpu_count() : 0; }

// Opens the shared state for a new host engine; DCGM_ST_OK or why not.
dcgmReturn_t open_state() {
  if (g_state) return DCGM_ST_OK;
  const char* path = std::getenv("AEGIS_EMULATED_STATE");
  if (!path || !*path) return DCGM_ST_INIT_ERROR;
  std::string error;
  g_state = aegis::emu::State::open(path, {}, &error);
  return g_state ? DCGM_ST_OK : DCGM_ST_INIT_ERROR;
}

dcgmReturn_t new_handle(dcgmHandle_t* handle) {
  if (!handle) return DCGM_ST_BADPARAM;
  if (!g_initialised) return DCGM_ST_UNINITIALIZED;
  if (const auto rc = open_state(); rc != DCGM_ST_OK) return rc;
  *handle = g_next_handle++;
  g_handles.insert(*handle);
  return DCGM_ST_OK;
}

bool valid(dcgmHandle_t handle) { return g_handles.count(handle) > 0; }

std::vector<int> gpus_of(dcgmGpuGrp_t group) {
  if (group == DCGM_GROUP_ALL_GPUS) {
    std::vector<int> all;
    for (int g = 0; g < gpu_count(); ++g) all.push_back(g);
    return all;
  }
  auto it = g_groups.find(group);
  return it == g_groups.end() ? std::vector<int>{} : it->second;
}

void read_field(int gpu, unsigned short field, dcgmFieldValue_v1& out) {
  out.fieldId = field;
  out.ts = 0;
  if (gpu < 0 || gpu >= gpu_count() || !g_watched.count({gpu, field})) {
    out.status = DCGM_ST_NOT_WATCHED;
    out.fieldType = DCGM_FT_DOUBLE;
    out.value.dbl = DCGM_FP64_BLANK;
    return;
  }
  out.status = DCGM_ST_OK;
  if (field == DCGM_FI_DEV_UUID) {
    out.fieldType = DCGM_FT_STRING;
    const std::string uuid = aegis::emu::emulated_uuid(gpu);
    std::snprintf(out.value.str, sizeof out.value.str, "%s", uuid.c_str());
    return;
  }
  const auto a = g_state->read(gpu).activity;
  out.fieldType = DCGM_FT_DOUBLE;
  out.value.dbl = field == DCGM_FI_PROF_SM_ACTIVE ? a.smact : field == DCGM_FI_PROF_SM_OCCUPANCY ? a.smocc : a.drama;
}

template <class F>
dcgmReturn_t locked(F&& f) noexcept {
  try {
    std::lock_guard lock(g_mu);
    return f();
  } catch (...) {
    return DCGM_ST_GENERIC_ERROR;
  }
}

}  // namespace

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmInit() {
  return locked([] {
    g_initialised = true;
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmShutdown() {
  return locked([] {
    if (!g_initialised) return DCGM_ST_UNINITIALIZED;
    g_initialised = false;
    g_handles.clear();
    g_groups.clear();
    g_field_groups.clear();
    g_watched.clear();
    g_state.reset();
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT const char* errorString(dcgmReturn_t rc) {
  switch (rc) {
    case DCGM_ST_OK: return "Success";
    case DCGM_ST_BADPARAM: return "Bad parameter passed to function";
    case DCGM_ST_INIT_ERROR: return "DCGM initialization error (emulated: AEGIS_EMULATED_STATE unusable)";
    case DCGM_ST_UNINITIALIZED: return "Uninitialized";
    case DCGM_ST_CONNECTION_NOT_VALID: return "Host engine connection invalid/disconnected";
    case DCGM_ST_PROFILING_NOT_SUPPORTED: return "Profiling is not supported for this group of GPUs or GPU";
    case DCGM_ST_NOT_WATCHED: return "Field is not being updated";
    default: return "Unknown error";
  }
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmStartEmbedded(int opMode, dcgmHandle_t* handle) {
  return locked([&] { return opMode == DCGM_OPERATION_MODE_AUTO || opMode == 2 ? new_handle(handle) : DCGM_ST_BADPARAM; });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmStopEmbedded(dcgmHandle_t handle) {
  return locked([&] { return g_handles.erase(handle) ? DCGM_ST_OK : DCGM_ST_BADPARAM; });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmConnect_v2(const char* address, dcgmConnectV2Params_v2* params, dcgmHandle_t* handle) {
  return locked([&] {
    if (!address || !params || params->version != dcgmConnectV2Params_version2) return DCGM_ST_BADPARAM;
    const char* listening = std::getenv("AEGIS_EMULATED_DCGM_HOSTENGINE");
    if (!listening || std::strcmp(listening, address) != 0) return DCGM_ST_CONNECTION_NOT_VALID;
    return new_handle(handle);
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmDisconnect(dcgmHandle_t handle) {
  return locked([&] { return g_handles.erase(handle) ? DCGM_ST_OK : DCGM_ST_BADPARAM; });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmGetAllSupportedDevices(dcgmHandle_t handle, unsigned int* ids, int* count) {
  return locked([&] {
    if (!valid(handle) || !ids || !count) return DCGM_ST_BADPARAM;
    *count = 0;
    for (int g = 0; g < gpu_count() && g < DCGM_MAX_NUM_DEVICES; ++g) ids[(*count)++] = static_cast<unsigned int>(g);
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmGroupCreate(dcgmHandle_t handle, int type, const char* name, dcgmGpuGrp_t* group) {
  return locked([&] {
    if (!valid(handle) || !name || !group || type != DCGM_GROUP_EMPTY) return DCGM_ST_BADPARAM;
    *group = g_next_id++;
    g_groups[*group];
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmGroupDestroy(dcgmHandle_t handle, dcgmGpuGrp_t group) {
  return locked([&] { return valid(handle) && g_groups.erase(group) ? DCGM_ST_OK : DCGM_ST_BADPARAM; });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmGroupAddDevice(dcgmHandle_t handle, dcgmGpuGrp_t group, unsigned int gpu) {
  return locked([&] {
    auto it = g_groups.find(group);
    if (!valid(handle) || it == g_groups.end() || static_cast<int>(gpu) >= gpu_count()) return DCGM_ST_BADPARAM;
    it->second.push_back(static_cast<int>(gpu));
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmFieldGroupCreate(dcgmHandle_t handle, int n, unsigned short* fields, const char* name,
                                                    dcgmFieldGrp_t* id) {
  return locked([&] {
    if (!valid(handle) || n < 1 || !fields || !name || !id) return DCGM_ST_BADPARAM;
    for (const auto& [other, fg] : g_field_groups)
      if (fg.first == name) return DCGM_ST_BADPARAM;  // real DCGM: DCGM_ST_DUPLICATE_KEY
    *id = g_next_id++;
    g_field_groups[*id] = {name, std::vector<unsigned short>(fields, fields + n)};
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmFieldGroupDestroy(dcgmHandle_t handle, dcgmFieldGrp_t id) {
  return locked([&] { return valid(handle) && g_field_groups.erase(id) ? DCGM_ST_OK : DCGM_ST_BADPARAM; });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmWatchFields(dcgmHandle_t handle, dcgmGpuGrp_t group, dcgmFieldGrp_t id,
                                               long long update_us, double, int) {
  return locked([&] {
    auto fg = g_field_groups.find(id);
    if (!valid(handle) || fg == g_field_groups.end() || update_us <= 0) return DCGM_ST_BADPARAM;
    for (unsigned short f : fg->second.second)
      if (is_profiling(f) && switch_off("AEGIS_EMULATED_DCGM_PROFILING")) return DCGM_ST_PROFILING_NOT_SUPPORTED;
    for (int g : gpus_of(group))
      for (unsigned short f : fg->second.second) g_watched.insert({g, f});
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmUnwatchFields(dcgmHandle_t handle, dcgmGpuGrp_t group, dcgmFieldGrp_t id) {
  return locked([&] {
    auto fg = g_field_groups.find(id);
    if (!valid(handle) || fg == g_field_groups.end()) return DCGM_ST_BADPARAM;
    for (int g : gpus_of(group))
      for (unsigned short f : fg->second.second) g_watched.erase({g, f});
    return DCGM_ST_OK;
  });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmUpdateAllFields(dcgmHandle_t handle, int) {
  return locked([&] { return valid(handle) ? DCGM_ST_OK : DCGM_ST_BADPARAM; });
}

AEGIS_DCGM_EXPORT dcgmReturn_t dcgmEntityGetLatestValues(dcgmHandle_t handle, int entity_group, int entity,
                                                         unsigned short* fields, unsigned int count,
                                                         dcgmFieldValue_v1* values) {
  return locked([&] {
    if (!valid(handle)) return DCGM_ST_CONNECTION_NOT_VALID;
    if (entity_group != DCGM_FE_GPU || !fields || !values) return DCGM_ST_BADPARAM;
    for (unsigned int i = 0; i < count; ++i) {
      if (values[i].version != dcgmFieldValue_version1) return DCGM_ST_BADPARAM;
      read_field(entity, fields[i], values[i]);
    }
    return DCGM_ST_OK;
  });
}

static_assert(std::is_same_v<decltype(&dcgmInit), dcgmInit_fn>);
static_assert(std::is_same_v<decltype(&dcgmStartEmbedded), dcgmStartEmbedded_fn>);
static_assert(std::is_same_v<decltype(&dcgmConnect_v2), dcgmConnect_v2_fn>);
static_assert(std::is_same_v<decltype(&dcgmGroupCreate), dcgmGroupCreate_fn>);
static_assert(std::is_same_v<decltype(&dcgmFieldGroupCreate), dcgmFieldGroupCreate_fn>);
static_assert(std::is_same_v<decltype(&dcgmWatchFields), dcgmWatchFields_fn>);
static_assert(std::is_same_v<decltype(&dcgmEntityGetLatestValues), dcgmEntityGetLatestValues_fn>);
static_assert(std::is_same_v<decltype(&errorString), errorString_fn>);
