#include "runtime/gpu/emulated/driver.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

namespace aegis::emu {

namespace {

std::mutex g_mu;  // guards the fields below against concurrent nvmlInit/nvmlShutdown
int g_refs = 0;
State* g_state = nullptr;  // a plain pointer: nothing to destroy at unload
// Read once at nvmlInit, as a driver enumerates its GPUs once.
int g_count = 0;
bool g_exists[kMaxDevices];  // GPUs and MIG instances
bool g_mig[kMaxGpus];
DriverOptions g_options;
char g_detail[512] = "";
nvml::nvmlDevice_st g_devices[kMaxDevices];

// Reads a 0/1 switch; false (with the detail set) for anything else.
bool read_switch(const char* name, bool* value) {
  const char* v = std::getenv(name);
  if (!v || !*v) return true;
  if (std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0) {
    *value = *v == '1';
    return true;
  }
  std::snprintf(g_detail, sizeof g_detail, "emulated driver: %s='%s' (write 0 or 1)", name, v);
  return false;
}

// AEGIS_EMULATED_GPM: "0", "1", or a comma list of them, one per GPU index.
bool read_gpm(std::uint64_t* mask) {
  const char* v = std::getenv("AEGIS_EMULATED_GPM");
  if (!v || !*v) return true;
  std::uint64_t m = 0;
  int gpu = 0;
  bool last = true;
  for (const char* p = v; *p; ++gpu) {
    if ((*p != '0' && *p != '1') || (p[1] != ',' && p[1] != '\0') || gpu >= kMaxGpus) {
      std::snprintf(g_detail, sizeof g_detail, "emulated driver: AEGIS_EMULATED_GPM='%s' (write 0, 1 or one per GPU: 0,1,1)", v);
      return false;
    }
    last = *p == '1';
    if (last) m |= std::uint64_t{1} << gpu;
    p += p[1] == ',' ? 2 : 1;
  }
  for (; gpu < kMaxGpus; ++gpu)
    if (last) m |= std::uint64_t{1} << gpu;
  *mask = m;
  return true;
}

nvml::nvmlReturn_t fail(const std::string& why) {
  std::snprintf(g_detail, sizeof g_detail, "emulated driver: %s", why.c_str());
  return nvml::NVML_ERROR_DRIVER_NOT_LOADED;
}

// The devices as the driver sees them from now on.
void enumerate(const State& state, int count) {
  g_count = count;
  for (int id = 0; id < kMaxDevices; ++id) {
    g_devices[id].id = id;
    const DeviceInfo d = gpu_of(id) < count ? state.device(id) : DeviceInfo{};
    g_exists[id] = d.exists();
    if (!is_mig_device(id)) g_mig[id] = d.mig_mode;
  }
}

nvml::nvmlReturn_t first_init() {
  DriverOptions o;
  if (!read_gpm(&o.gpm) || !read_switch("AEGIS_EMULATED_PROCESS_MEMORY", &o.process_memory) ||
      !read_switch("AEGIS_EMULATED_PROCESS_UTIL", &o.process_util) ||
      !read_switch("AEGIS_EMULATED_CALL_COSTS", &o.call_costs))
    return nvml::NVML_ERROR_DRIVER_NOT_LOADED;
  if (const char* v = std::getenv("AEGIS_EMULATED_PROCESS_API"); v && *v) {
    if (std::strlen(v) != 1 || v[0] < '1' || v[0] > '3')
      return fail(std::string("AEGIS_EMULATED_PROCESS_API='") + v + "' (write 1, 2 or 3)");
    o.process_api = v[0] - '0';
  }
  const char* path = std::getenv("AEGIS_EMULATED_STATE");
  if (!path || !*path) return fail("AEGIS_EMULATED_STATE is not set (the path of the shared state file)");
  std::string error;
  std::vector<GpuSpec> gpus;
  if (const char* v = std::getenv("AEGIS_EMULATED_GPUS"); v && *v) {
    gpus = parse_gpu_specs(v, &error);
    if (gpus.empty()) return fail(error);
  }
  std::optional<std::vector<MigGpu>> mig;
  if (const char* v = std::getenv("AEGIS_EMULATED_MIG"); v && *v) {
    mig = parse_mig_layout(v, &error);
    if (!mig) return fail(error);
  } else if (!gpus.empty()) {
    mig.emplace();  // a new machine description without MIG: no GPU in MIG mode
  }
  auto state = State::open(path, gpus, &error);
  if (!state) return fail(error);
  try {
    const int count = state->gpu_count();
    if (count == 0) return fail("no GPUs: set AEGIS_EMULATED_GPUS (e.g. 3x40960)");
    if (mig && !state->set_mig(*mig, &error)) return fail(error);
    enumerate(*state, count);
  } catch (const StateError& e) {
    return fail(e.what());
  }
  g_options = o;
  g_state = state.release();
  return nvml::NVML_SUCCESS;
}

thread_local char t_call_detail[512] = "";

}  // namespace

nvml::nvmlReturn_t driver_init() {
  std::lock_guard lock(g_mu);
  if (g_refs > 0) {
    ++g_refs;
    return nvml::NVML_SUCCESS;
  }
  g_detail[0] = '\0';
  const auto rc = first_init();
  if (rc == nvml::NVML_SUCCESS) g_refs = 1;
  return rc;
}

nvml::nvmlReturn_t driver_shutdown() {
  std::lock_guard lock(g_mu);
  if (g_refs == 0) return nvml::NVML_ERROR_UNINITIALIZED;
  if (--g_refs == 0) {
    delete g_state;
    g_state = nullptr;
  }
  return nvml::NVML_SUCCESS;
}

const char* driver_init_detail() { return g_detail; }

void set_call_detail(const char* why) { std::snprintf(t_call_detail, sizeof t_call_detail, "%s", why); }

const char* call_detail() { return t_call_detail; }

State* driver_state() { return g_state; }

const DriverOptions& driver_options() { return g_options; }

int device_count() { return g_count; }

int device_index(nvml::nvmlDevice_t device) {
  // Compared as integers: a foreign pointer need not point into the array.
  const auto p = reinterpret_cast<std::uintptr_t>(device), base = reinterpret_cast<std::uintptr_t>(g_devices);
  if (!g_state || p < base || (p - base) % sizeof(nvml::nvmlDevice_st) != 0) return -1;
  const auto i = (p - base) / sizeof(nvml::nvmlDevice_st);
  return i < static_cast<std::uintptr_t>(kMaxDevices) && g_exists[i] ? static_cast<int>(i) : -1;
}

nvml::nvmlDevice_t device_handle(int id) { return &g_devices[id]; }

bool mig_mode(int gpu) { return gpu >= 0 && gpu < g_count && g_mig[gpu]; }

}  // namespace aegis::emu
