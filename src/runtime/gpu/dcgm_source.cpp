// DcgmActivity over libdcgm (dcgm_library.h). DCGM numbers GPUs its own way, so they are
// matched to NVML's by UUID (field 54), read once at start; then one group of exactly the
// GPUs asked for watches the three profiling fields, and each sample reads their latest
// values. Only those GPUs are profiled: on Ampere and older DCGM's profiling holds the
// GPU's performance counters (Nsight gets them only while it is paused), and a GPU with GPM
// needs none of it.
#include <algorithm>
#include <array>
#include <cstring>
#include <unistd.h>

#include "runtime/gpu/dcgm_library.h"
#include "runtime/gpu/dcgm_source.h"

namespace aegis {

namespace {

using namespace dcgm;

// How long a connection attempt to nv-hostengine may take (auto mode then embeds one).
constexpr unsigned int kConnectTimeoutMs = 1000;
// Samples DCGM keeps per field: the latest is all we read; two cover a read between updates.
constexpr int kKeepSamples = 2;

std::array<unsigned short, 3> activity_fields() {
  return {DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_SM_OCCUPANCY, DCGM_FI_PROF_DRAM_ACTIVE};
}

// A ratio DCGM gave, or empty for a blank (no data, not supported, no permission).
std::optional<double> ratio(const dcgmFieldValue_v1& v) {
  if (v.status != DCGM_ST_OK || v.fieldType != DCGM_FT_DOUBLE || !(v.value.dbl < DCGM_FP64_BLANK)) return std::nullopt;
  return std::clamp(v.value.dbl, 0.0, 1.0);
}

struct Watched {
  unsigned int gpu_id = 0;  // DCGM's
  std::string uuid;
};

class DcgmReader final : public DcgmActivity {
 public:
  explicit DcgmReader(std::unique_ptr<dcgm::Library> lib) : lib_(std::move(lib)) {}
  ~DcgmReader() override { stop(); }

  bool start(const DcgmOptions& o, const std::vector<std::string>& uuids, std::string* error);

  void fill(std::vector<GpuStatus>& gpus) override {
    if (!connected_) return;
    auto fields = activity_fields();
    for (const auto& w : watched_) {
      auto at = std::find_if(gpus.begin(), gpus.end(), [&](const GpuStatus& s) { return s.uuid == w.uuid; });
      if (at == gpus.end()) continue;
      std::array<dcgmFieldValue_v1, 3> values{};
      for (auto& v : values) v.version = dcgmFieldValue_version1;
      const dcgmReturn_t rc = lib_->entityGetLatestValues(handle_, DCGM_FE_GPU, static_cast<int>(w.gpu_id),
                                                          fields.data(), fields.size(), values.data());
      if (rc != DCGM_ST_OK) {
        last_error_ = "dcgmEntityGetLatestValues: " + lib_->error_string(rc);
        if (rc == DCGM_ST_CONNECTION_NOT_VALID) connected_ = false;  // the host engine went away
        continue;
      }
      const auto smact = ratio(values[0]), smocc = ratio(values[1]), drama = ratio(values[2]);
      if (!smact || !smocc || !drama) continue;
      at->smact = smact, at->smocc = smocc, at->drama = drama;
      at->activity_from = ActivitySource::Dcgm;
    }
  }

  std::string describe() const override {
    std::string out = lib_->path() + ", " + how_ + ", " + std::to_string(watched_.size()) +
                      (watched_.size() == 1 ? " GPU" : " GPUs");
    if (!connected_) out += ", connection lost";
    if (!last_error_.empty()) out += ", last error: " + last_error_;
    return out;
  }

 private:
  bool connect(const DcgmOptions& o, std::string* error);
  std::vector<Watched> find_gpus(const std::vector<std::string>& uuids, long long update_us, std::string* error);
  void stop();

  std::unique_ptr<dcgm::Library> lib_;
  dcgmHandle_t handle_ = 0;
  bool open_ = false;                     // handle_ is a connection or an embedded engine
  bool connected_ = false, embedded_ = false;  // connected_: it still answers
  dcgmGpuGrp_t group_ = 0;
  dcgmFieldGrp_t fields_ = 0;
  bool have_group_ = false, have_fields_ = false, watching_ = false;
  std::vector<Watched> watched_;
  std::string how_;
  std::string last_error_;
};

bool DcgmReader::connect(const DcgmOptions& o, std::string* error) {
  if (o.mode != "embedded") {
    dcgmConnectV2Params_v2 params{dcgmConnectV2Params_version2, 0, kConnectTimeoutMs, o.hostengine.starts_with('/') ? 1U : 0U};
    const dcgmReturn_t rc = lib_->connect(o.hostengine.c_str(), &params, &handle_);
    if (rc == DCGM_ST_OK) {
      how_ = "nv-hostengine at " + o.hostengine;
      return open_ = connected_ = true;
    }
    if (o.mode == "hostengine") {
      *error = "cannot connect to nv-hostengine at " + o.hostengine + ": " + lib_->error_string(rc);
      return false;
    }
  }
  const dcgmReturn_t rc = lib_->startEmbedded(DCGM_OPERATION_MODE_AUTO, &handle_);
  if (rc != DCGM_ST_OK) {
    *error = "cannot start an embedded DCGM host engine: " + lib_->error_string(rc);
    return false;
  }
  how_ = "embedded host engine";
  return open_ = connected_ = embedded_ = true;
}

// DCGM's ids of the GPUs named by `uuids`, from each GPU's UUID field.
std::vector<Watched> DcgmReader::find_gpus(const std::vector<std::string>& uuids, long long update_us, std::string* error) {
  std::array<unsigned int, DCGM_MAX_NUM_DEVICES> ids{};
  int count = 0;
  if (const auto rc = lib_->getAllSupportedDevices(handle_, ids.data(), &count); rc != DCGM_ST_OK) {
    *error = "dcgmGetAllSupportedDevices: " + lib_->error_string(rc);
    return {};
  }
  unsigned short uuid_field = DCGM_FI_DEV_UUID;
  dcgmFieldGrp_t fg = 0;
  const std::string name = "aegis-uuid-" + std::to_string(getpid());
  if (const auto rc = lib_->fieldGroupCreate(handle_, 1, &uuid_field, name.c_str(), &fg); rc != DCGM_ST_OK) {
    *error = "dcgmFieldGroupCreate: " + lib_->error_string(rc);
    return {};
  }
  std::vector<Watched> out;
  if (const auto rc = lib_->watchFields(handle_, DCGM_GROUP_ALL_GPUS, fg, update_us, 0, 1); rc != DCGM_ST_OK) {
    *error = "dcgmWatchFields (UUID): " + lib_->error_string(rc);
  } else {
    lib_->updateAllFields(handle_, 1);
    for (int i = 0; i < count && i < DCGM_MAX_NUM_DEVICES; ++i) {
      dcgmFieldValue_v1 v{};
      v.version = dcgmFieldValue_version1;
      if (lib_->entityGetLatestValues(handle_, DCGM_FE_GPU, static_cast<int>(ids[i]), &uuid_field, 1, &v) != DCGM_ST_OK ||
          v.status != DCGM_ST_OK || v.fieldType != DCGM_FT_STRING)
        continue;
      const std::string uuid(v.value.str, strnlen(v.value.str, sizeof v.value.str));
      if (std::find(uuids.begin(), uuids.end(), uuid) != uuids.end()) out.push_back({ids[i], uuid});
    }
    lib_->unwatchFields(handle_, DCGM_GROUP_ALL_GPUS, fg);
    if (out.empty()) *error = "DCGM knows none of the GPUs without GPM (" + std::to_string(count) + " GPUs supported)";
  }
  lib_->fieldGroupDestroy(handle_, fg);
  return out;
}

bool DcgmReader::start(const DcgmOptions& o, const std::vector<std::string>& uuids, std::string* error) {
  if (!connect(o, error)) return false;
  const auto update_us = static_cast<long long>(std::max(o.update_s, 0.001) * 1e6);
  watched_ = find_gpus(uuids, update_us, error);
  if (watched_.empty()) return false;
  const std::string suffix = "-" + std::to_string(getpid());  // names are unique per host engine
  if (const auto rc = lib_->groupCreate(handle_, DCGM_GROUP_EMPTY, ("aegis" + suffix).c_str(), &group_); rc != DCGM_ST_OK) {
    *error = "dcgmGroupCreate: " + lib_->error_string(rc);
    return false;
  }
  have_group_ = true;
  for (const auto& w : watched_) {
    if (const auto rc = lib_->groupAddDevice(handle_, group_, w.gpu_id); rc != DCGM_ST_OK) {
      *error = "dcgmGroupAddDevice: " + lib_->error_string(rc);
      return false;
    }
  }
  auto fields = activity_fields();
  if (const auto rc = lib_->fieldGroupCreate(handle_, static_cast<int>(fields.size()), fields.data(),
                                             ("aegis-activity" + suffix).c_str(), &fields_);
      rc != DCGM_ST_OK) {
    *error = "dcgmFieldGroupCreate: " + lib_->error_string(rc);
    return false;
  }
  have_fields_ = true;
  const double keep_s = static_cast<double>(kKeepSamples) * std::max(o.update_s, 0.001);
  if (const auto rc = lib_->watchFields(handle_, group_, fields_, update_us, keep_s, kKeepSamples); rc != DCGM_ST_OK) {
    *error = "DCGM cannot profile these GPUs (dcgmWatchFields: " + lib_->error_string(rc) +
             "; consumer GPUs have no DCGM profiling, and a profiler holding the counters blocks it)";
    return false;
  }
  watching_ = true;
  return true;
}

void DcgmReader::stop() {
  if (!open_) return;
  if (connected_) {
    if (watching_) lib_->unwatchFields(handle_, group_, fields_);
    if (have_fields_) lib_->fieldGroupDestroy(handle_, fields_);
    if (have_group_) lib_->groupDestroy(handle_, group_);
  }
  if (embedded_) lib_->stopEmbedded(handle_);
  else if (connected_) lib_->disconnect(handle_);
  open_ = connected_ = embedded_ = false;
}

}  // namespace

std::unique_ptr<DcgmActivity> open_dcgm(const DcgmOptions& options, const std::vector<std::string>& uuids,
                                        std::string* error) {
  std::string ignored;
  if (!error) error = &ignored;
  if (options.mode == "off") {
    *error = "off (dcgm = \"off\")";
    return nullptr;
  }
  const std::vector<std::string> candidates =
      options.library.empty() ? std::vector<std::string>{"libdcgm.so.4", "libdcgm.so.3", "libdcgm.so"}
                              : std::vector<std::string>{options.library};
  std::unique_ptr<dcgm::Library> lib;
  for (const auto& path : candidates) {
    std::string why;
    lib = dcgm::Library::open(path, &why);
    if (lib) break;
    *error = candidates.size() == 1 ? why : "no DCGM library found (libdcgm.so.4, .so.3 or .so; install datacenter-gpu-manager)";
  }
  if (!lib) return nullptr;
  auto reader = std::make_unique<DcgmReader>(std::move(lib));
  if (!reader->start(options, uuids, error)) return nullptr;
  error->clear();
  return reader;
}

}  // namespace aegis
