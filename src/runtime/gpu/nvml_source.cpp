// GpuSource over NVML loaded with dlopen (nvml_library.h). Newest API versions first;
// what a GPU or driver turns out not to support is remembered and never asked again, so
// a sample costs a handful of driver calls per GPU and no allocation beyond its result.
// A GPU in MIG mode is not a CUDA device: its MIG instances are, so they are listed in its
// place, each through its own MIG device handle. MIG and compute modes are only read.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "runtime/gpu/gpu_source.h"
#include "runtime/gpu/nvml_library.h"
#include "runtime/gpu/nvml_process_util.h"

namespace aegis {

namespace {

using namespace nvml;

// Entries in the first process buffer; it grows on INSUFFICIENT_SIZE and stays grown.
constexpr unsigned int kFirstProcessCapacity = 8;
// Enough for two API downgrades plus a resize, with room for processes that start between
// the size query and the retry.
constexpr int kProcessAttempts = 6;

MiB to_mib(unsigned long long bytes) { return static_cast<MiB>(bytes >> 20U); }

double fraction(double percent) { return std::clamp(percent / 100.0, 0.0, 1.0); }

// "Not there" answers: the field stays empty for good on this GPU.
bool unsupported(nvmlReturn_t rc) {
  return rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND ||
         rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

enum class ProcessApi { V3, V2, V1, None };

// "3g.40gb" from a MIG device's name, "NVIDIA A100-SXM4-80GB MIG 3g.40gb" ("" if it has none).
std::string mig_profile(const std::string& name) {
  const auto at = name.rfind(" MIG ");
  if (at == std::string::npos) return "";
  const std::string rest = name.substr(at + 5);
  return rest.substr(0, rest.find(' '));
}

// A schedulable device: a whole GPU, or a MIG instance (`mig`, with its GPU's handle).
struct Device {
  nvmlDevice_t handle = nullptr;
  GpuStatus fixed;  // index, uuid, name, MIG mode or parent and profile: fixed while loaded
  bool memory_v2 = true, util = true, power = true, energy = true, processes = true;
  bool mig = false;
  nvmlDevice_t parent = nullptr;  // MIG: the GPU's handle, for GPM
  std::optional<unsigned int> gpu_instance;  // MIG: its GPU instance id, for GPM
  bool gpm = false;
  nvmlGpmSample_t gpm_prev = nullptr, gpm_cur = nullptr;
  bool have_prev = false;  // GPM metrics need two samples
  ProcessUtilReader process_util;  // per-process samples, for a job's first activity
};

// A GPU in MIG mode, for describe().
struct MigGpu {
  int index = 0;
  int instances = 0;
};

class NvmlSource final : public GpuSource {
 public:
  explicit NvmlSource(std::unique_ptr<nvml::Library> lib) : lib_(std::move(lib)) {}

  ~NvmlSource() override {
    for (auto& d : devices_) free_gpm(d);  // before the library unloads
  }

  // Enumerates the GPUs and what each supports; false with `error` set on failure.
  bool start(std::string* error);

  using GpuSource::sample;
  std::vector<GpuStatus> sample(const SampleRequest& what) override {
    std::lock_guard lock(mu_);
    std::vector<GpuStatus> out;
    out.reserve(devices_.size());
    for (auto& d : devices_) {
      GpuStatus s = d.fixed;
      read_memory(d, s);
      read_optional(d, s, what.energy);
      read_processes(d, s);
      // The costly calls only where asked (gpu_source.h SampleRequest).
      if (what.process_util_on(d.fixed.uuid)) d.process_util.read(lib_->getProcessUtilization, d.handle, s);
      read_gpm(d, s);
      out.push_back(std::move(s));
    }
    return out;
  }

  std::string describe() const override;

 private:
  [[noreturn]] void lost(const Device& d, const char* call, nvmlReturn_t rc) const {
    throw std::runtime_error("NVML: " + std::string(d.mig ? "MIG instance of GPU " : "GPU ") +
                             std::to_string(d.fixed.index) + " (" + d.fixed.uuid + "): " + call + ": " +
                             lib_->error_string(rc));
  }

  void free_gpm(Device& d) {
    if (d.gpm_prev) lib_->gpmSampleFree(d.gpm_prev);
    if (d.gpm_cur) lib_->gpmSampleFree(d.gpm_cur);
    d.gpm_prev = d.gpm_cur = nullptr;
    d.gpm = d.have_prev = false;
  }

  bool add_instances(const Device& gpu);
  void start_gpm(Device& d);
  void read_memory(Device& d, GpuStatus& s);
  void read_optional(Device& d, GpuStatus& s, bool energy);
  void read_processes(Device& d, GpuStatus& s);
  void read_mps_processes(Device& d, GpuStatus& s);
  void read_gpm(Device& d, GpuStatus& s);
  nvmlReturn_t list_processes(nvmlDevice_t h, unsigned int* count);

  mutable std::mutex mu_;  // sample() on aegisd's sampling thread, describe() on its loop
  std::unique_ptr<nvml::Library> lib_;
  std::vector<Device> devices_;
  int skipped_ = 0;  // GPUs (or MIG instances) NVML counts but would not open (permissions, lost)
  int gpus_ = 0;     // whole GPUs found, in MIG mode or not
  std::vector<MigGpu> mig_gpus_;
  std::string version_;
  ProcessApi api_ = ProcessApi::None;
  std::vector<unsigned char> process_buf_;
  unsigned int process_capacity_ = 0;
  nvmlGpmMetricsGet_t metrics_{};  // reused: about 4 KiB
};

bool NvmlSource::start(std::string* error) {
  char text[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = "";
  if (lib_->getNVMLVersion && lib_->getNVMLVersion(text, sizeof text) == NVML_SUCCESS) version_ = text;
  else if (lib_->getDriverVersion && lib_->getDriverVersion(text, sizeof text) == NVML_SUCCESS) version_ = std::string("driver ") + text;
  else version_ = "(version unknown)";

  api_ = lib_->getProcesses_v3 ? ProcessApi::V3
         : lib_->getProcesses_v2 ? ProcessApi::V2
         : lib_->getProcesses_v1 ? ProcessApi::V1
                                 : ProcessApi::None;
  process_capacity_ = kFirstProcessCapacity;
  // Room for the larger _v3 entry some headers declare, whichever stride the driver uses.
  process_buf_.resize(process_capacity_ * sizeof(nvmlProcessInfo_cc_t));

  unsigned int count = 0;
  if (const auto rc = lib_->getCount(&count); rc != NVML_SUCCESS) {
    *error = "NVML from '" + lib_->path() + "': nvmlDeviceGetCount_v2: " + lib_->error_string(rc);
    return false;
  }
  devices_.reserve(count);
  for (unsigned int i = 0; i < count; ++i) {
    Device d;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "", name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
    if (lib_->getHandleByIndex(i, &d.handle) != NVML_SUCCESS || lib_->getUUID(d.handle, uuid, sizeof uuid) != NVML_SUCCESS) {
      ++skipped_;
      continue;
    }
    ++gpus_;
    d.fixed.index = static_cast<int>(i);
    d.fixed.uuid = uuid;
    d.memory_v2 = lib_->getMemoryInfo_v2 != nullptr;
    if (lib_->getName && lib_->getName(d.handle, name, sizeof name) == NVML_SUCCESS) d.fixed.name = name;
    unsigned int current = 0, pending = 0;
    if (lib_->getMigMode && lib_->getMigMode(d.handle, &current, &pending) == NVML_SUCCESS)
      d.fixed.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    // Without the MIG calls the GPU stays whole, flagged, as before MIG support.
    if (d.fixed.mig_enabled && lib_->has_mig() && add_instances(d)) continue;
    devices_.push_back(std::move(d));
  }
  for (auto& d : devices_) start_gpm(d);
  metrics_.version = NVML_GPM_METRICS_GET_VERSION;
  return true;
}

// Lists the MIG instances of `gpu` (in MIG mode) as devices; false when the driver will
// not say how many slots it has.
bool NvmlSource::add_instances(const Device& gpu) {
  unsigned int slots = 0;
  if (lib_->getMaxMigDeviceCount(gpu.handle, &slots) != NVML_SUCCESS) return false;
  MigGpu summary{gpu.fixed.index, 0};
  for (unsigned int k = 0; k < slots; ++k) {
    Device d;
    const nvmlReturn_t rc = lib_->getMigDeviceHandleByIndex(gpu.handle, k, &d.handle);
    if (rc == NVML_ERROR_NOT_FOUND) continue;  // an empty slot
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "", name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
    if (rc != NVML_SUCCESS || lib_->getUUID(d.handle, uuid, sizeof uuid) != NVML_SUCCESS) {
      ++skipped_;
      continue;
    }
    d.mig = true;
    d.parent = gpu.handle;
    d.fixed.index = gpu.fixed.index;
    d.fixed.uuid = uuid;
    d.fixed.parent_uuid = gpu.fixed.uuid;
    if (lib_->getName && lib_->getName(d.handle, name, sizeof name) == NVML_SUCCESS) d.fixed.name = name;
    d.fixed.mig_profile = mig_profile(d.fixed.name);
    d.memory_v2 = lib_->getMemoryInfo_v2 != nullptr;
    // A MIG device has no utilisation counter; power and energy are the whole GPU's, and
    // copying them to each instance would count them several times, so they stay empty.
    d.util = d.power = d.energy = false;
    unsigned int gi = 0;
    if (lib_->getGpuInstanceId && lib_->getGpuInstanceId(d.handle, &gi) == NVML_SUCCESS) d.gpu_instance = gi;
    devices_.push_back(std::move(d));
    ++summary.instances;
  }
  mig_gpus_.push_back(summary);
  return true;
}

void NvmlSource::start_gpm(Device& d) {
  if (!lib_->has_gpm()) return;
  // An instance is sampled through its GPU's handle and its GPU instance id.
  if (d.mig && (!lib_->gpmMigSampleGet || !d.gpu_instance)) return;
  nvmlGpmSupport_t support{NVML_GPM_SUPPORT_VERSION, 0};
  const nvmlDevice_t h = d.mig ? d.parent : d.handle;
  if (lib_->gpmQueryDeviceSupport(h, &support) != NVML_SUCCESS || !support.isSupportedDevice) return;
  d.gpm = lib_->gpmSampleAlloc(&d.gpm_prev) == NVML_SUCCESS && lib_->gpmSampleAlloc(&d.gpm_cur) == NVML_SUCCESS;
  if (!d.gpm) free_gpm(d);
}

void NvmlSource::read_memory(Device& d, GpuStatus& s) {
  unsigned long long total = 0, free = 0;
  nvmlReturn_t rc = NVML_ERROR_NOT_SUPPORTED;
  if (d.memory_v2) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    rc = lib_->getMemoryInfo_v2(d.handle, &m);
    total = m.total, free = m.free;
    if (unsupported(rc)) d.memory_v2 = false;
  }
  if (rc != NVML_SUCCESS && !d.memory_v2) {
    nvmlMemory_t m{};
    rc = lib_->getMemoryInfo(d.handle, &m);
    total = m.total, free = m.free;
  }
  if (rc != NVML_SUCCESS) lost(d, "nvmlDeviceGetMemoryInfo", rc);
  s.total_mib = to_mib(total);
  s.free_mib = to_mib(free);
  // What is not free is in use, driver reservations included (v2 reports them apart).
  s.used_mib = s.total_mib - s.free_mib;
}

void NvmlSource::read_optional(Device& d, GpuStatus& s, bool energy) {
  auto ok = [&](nvmlReturn_t rc, bool& supported) {
    if (rc == NVML_ERROR_GPU_IS_LOST) lost(d, "query", rc);
    if (unsupported(rc)) supported = false;
    return rc == NVML_SUCCESS;
  };
  if (d.util && lib_->getUtilizationRates) {
    nvmlUtilization_t u{};
    if (ok(lib_->getUtilizationRates(d.handle, &u), d.util)) s.util = fraction(u.gpu);
  }
  if (d.power && lib_->getPowerUsage) {
    unsigned int mw = 0;
    if (ok(lib_->getPowerUsage(d.handle, &mw), d.power)) s.power_w = mw / 1000.0;
  }
  if (energy && d.energy && lib_->getTotalEnergyConsumption) {
    unsigned long long mj = 0;
    if (ok(lib_->getTotalEnergyConsumption(d.handle, &mj), d.energy)) s.energy_j = static_cast<double>(mj) / 1000.0;
  }
}

nvmlReturn_t NvmlSource::list_processes(nvmlDevice_t h, unsigned int* count) {
  void* buf = process_buf_.data();
  switch (api_) {
    case ProcessApi::V3: return lib_->getProcesses_v3(h, count, static_cast<nvmlProcessInfo_v3_t*>(buf));
    case ProcessApi::V2: return lib_->getProcesses_v2(h, count, static_cast<nvmlProcessInfo_v2_t*>(buf));
    case ProcessApi::V1: return lib_->getProcesses_v1(h, count, static_cast<nvmlProcessInfo_v1_t*>(buf));
    case ProcessApi::None: break;
  }
  return NVML_ERROR_FUNCTION_NOT_FOUND;
}

void NvmlSource::read_processes(Device& d, GpuStatus& s) {
  for (int attempt = 0; attempt < kProcessAttempts && d.processes && api_ != ProcessApi::None; ++attempt) {
    unsigned int count = process_capacity_;
    const nvmlReturn_t rc = list_processes(d.handle, &count);
    if (rc == NVML_SUCCESS) {
      const std::size_t stride = api_ == ProcessApi::V1 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_v2_t);
      s.processes.reserve(count);
      for (unsigned int i = 0; i < count && i < process_capacity_; ++i) {
        nvmlProcessInfo_v1_t p{};  // pid and usedGpuMemory lead every version's layout
        std::memcpy(&p, process_buf_.data() + i * stride, sizeof p);
        GpuProcess gp{p.pid, std::nullopt, std::nullopt};
        if (p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) gp.used_mib = to_mib(p.usedGpuMemory);
        s.processes.push_back(gp);
      }
      read_mps_processes(d, s);
      return;
    }
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      process_capacity_ = std::max(process_capacity_ * 2, count + count / 2 + 1);
      process_buf_.resize(process_capacity_ * sizeof(nvmlProcessInfo_cc_t));
    } else if (rc == NVML_ERROR_FUNCTION_NOT_FOUND) {  // the driver is older than the library
      api_ = api_ == ProcessApi::V3 && lib_->getProcesses_v2 ? ProcessApi::V2
             : api_ != ProcessApi::V1 && lib_->getProcesses_v1 ? ProcessApi::V1
                                                                : ProcessApi::None;
    } else {
      if (rc == NVML_ERROR_GPU_IS_LOST) lost(d, "nvmlDeviceGetComputeRunningProcesses", rc);
      if (rc == NVML_ERROR_NOT_SUPPORTED) d.processes = false;
      return;
    }
  }
}

// MPS clients appear in NVML's MPS list, not the compute list (nvtop reads both): without
// it a job running as an MPS client would look absent from its GPU.
void NvmlSource::read_mps_processes(Device& d, GpuStatus& s) {
  if (!lib_->getMpsProcesses_v3 || api_ != ProcessApi::V3) return;
  std::vector<nvmlProcessInfo_v3_t> buf(process_capacity_);
  for (int attempt = 0; attempt < kProcessAttempts; ++attempt) {
    unsigned int count = static_cast<unsigned int>(buf.size());
    const nvmlReturn_t rc = lib_->getMpsProcesses_v3(d.handle, &count, buf.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      buf.resize(count + count / 2 + 1);
      continue;
    }
    if (rc != NVML_SUCCESS) return;  // an older driver or no MPS: the compute list is all
    for (unsigned int i = 0; i < count && i < buf.size(); ++i) {
      const auto same = [&](const GpuProcess& p) { return p.pid == buf[i].pid; };
      if (auto it = std::find_if(s.processes.begin(), s.processes.end(), same); it != s.processes.end()) {
        it->mps_client = true;  // a real driver lists a client in both lists
        continue;
      }
      GpuProcess gp{buf[i].pid, std::nullopt, std::nullopt, true};
      if (buf[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) gp.used_mib = to_mib(buf[i].usedGpuMemory);
      s.processes.push_back(gp);
    }
    return;
  }
}

void NvmlSource::read_gpm(Device& d, GpuStatus& s) {
  s.gpm = d.gpm;
  if (!d.gpm) return;
  const nvmlReturn_t rc = d.mig ? lib_->gpmMigSampleGet(d.parent, *d.gpu_instance, d.gpm_cur)
                                : lib_->gpmSampleGet(d.handle, d.gpm_cur);
  if (rc != NVML_SUCCESS) {
    if (unsupported(rc)) free_gpm(d);
    d.have_prev = false;
    return;
  }
  if (d.have_prev) {
    constexpr unsigned int ids[] = {NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY, NVML_GPM_METRIC_DRAM_BW_UTIL};
    metrics_.numMetrics = 3;
    metrics_.sample1 = d.gpm_prev;
    metrics_.sample2 = d.gpm_cur;
    for (unsigned int i = 0; i < 3; ++i) metrics_.metrics[i].metricId = ids[i];
    if (lib_->gpmMetricsGet(&metrics_) == NVML_SUCCESS) {
      std::optional<double>* fields[] = {&s.smact, &s.smocc, &s.drama};
      for (unsigned int i = 0; i < 3; ++i)
        if (metrics_.metrics[i].nvmlReturn == NVML_SUCCESS) *fields[i] = fraction(metrics_.metrics[i].value);
      if (s.smact || s.smocc || s.drama) s.activity_from = ActivitySource::Gpm;
    }
  }
  std::swap(d.gpm_prev, d.gpm_cur);
  d.have_prev = true;
}

std::string NvmlSource::describe() const {
  std::lock_guard lock(mu_);
  const auto n = devices_.size();
  const auto gpm = std::count_if(devices_.begin(), devices_.end(), [](const Device& d) { return d.gpm; });
  std::string out = "NVML " + version_ + " via " + lib_->path() + ", " + std::to_string(gpus_);
  out += gpus_ == 1 ? " GPU" : " GPUs";
  out += ", GPM: ";
  out += gpm == 0 ? "no" : static_cast<std::size_t>(gpm) == n ? "yes" : std::to_string(gpm) + " of " + std::to_string(n);
  for (const auto& m : mig_gpus_) {
    out += ", MIG on GPU " + std::to_string(m.index) + " (";
    out += m.instances == 0 ? "no instances" : std::to_string(m.instances) + (m.instances == 1 ? " instance" : " instances");
    out += ")";
  }
  for (const auto& d : devices_)
    if (d.fixed.mig_enabled) out += ", MIG on GPU " + std::to_string(d.fixed.index) + " (its instances could not be listed)";
  if (skipped_ > 0) out += ", " + std::to_string(skipped_) + " more not accessible";
  return out;
}

}  // namespace

std::unique_ptr<GpuSource> open_nvml(const std::string& library, std::string* error) {
  std::string ignored;
  if (!error) error = &ignored;
  auto lib = nvml::Library::open(library, error);
  if (!lib) return nullptr;
  auto source = std::make_unique<NvmlSource>(std::move(lib));
  if (!source->start(error)) return nullptr;
  return source;
}

}  // namespace aegis
