// A DCGM library (libdcgm) loaded with dlopen, its symbols resolved and dcgmInit done; no
// build dependency on DCGM, as for NVML (nvml_library.h). Destroying it shuts DCGM down and
// unloads the library. Used only by dcgm_source.cpp.
#pragma once
#include <memory>
#include <string>

#include "runtime/gpu/dcgm_api.h"
#include "runtime/gpu/dl_library.h"

namespace aegis::dcgm {

class Library {
 public:
  // Null, with `error` set to one line, when the library cannot be loaded or initialised.
  static std::unique_ptr<Library> open(const std::string& path, std::string* error) {
    std::unique_ptr<Library> lib(new Library);
    auto start = [&] {
      const dcgmReturn_t rc = lib->init();
      return rc == DCGM_ST_OK ? std::string() : lib->error_string(rc);
    };
    if (!lib->dl_.load(path, "DCGM", "", [&] { return lib->resolve(); }, start, error)) return nullptr;
    lib->initialised_ = true;
    return lib;
  }

  ~Library() {
    if (initialised_) shutdown();  // then dl_ unloads the library
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const std::string& path() const { return dl_.path(); }

  std::string error_string(dcgmReturn_t rc) const {
    const char* s = errorString ? errorString(rc) : nullptr;
    return (s ? std::string(s) : "DCGM error") + " (code " + std::to_string(rc) + ")";
  }

  dcgmInit_fn init = nullptr;
  dcgmShutdown_fn shutdown = nullptr;
  dcgmStartEmbedded_fn startEmbedded = nullptr;
  dcgmStopEmbedded_fn stopEmbedded = nullptr;
  dcgmConnect_v2_fn connect = nullptr;
  dcgmDisconnect_fn disconnect = nullptr;
  errorString_fn errorString = nullptr;  // optional: codes are printed as numbers without it
  dcgmGetAllSupportedDevices_fn getAllSupportedDevices = nullptr;
  dcgmGroupCreate_fn groupCreate = nullptr;
  dcgmGroupDestroy_fn groupDestroy = nullptr;
  dcgmGroupAddDevice_fn groupAddDevice = nullptr;
  dcgmFieldGroupCreate_fn fieldGroupCreate = nullptr;
  dcgmFieldGroupDestroy_fn fieldGroupDestroy = nullptr;
  dcgmWatchFields_fn watchFields = nullptr;
  dcgmUnwatchFields_fn unwatchFields = nullptr;
  dcgmUpdateAllFields_fn updateAllFields = nullptr;
  dcgmEntityGetLatestValues_fn entityGetLatestValues = nullptr;

 private:
  Library() = default;

  // The name of the first required symbol missing, or null.
  const char* resolve() {
    const char* missing = nullptr;
    auto need = [&](auto* out, const char* name) { dl_.need(out, name, missing); };
    need(&init, "dcgmInit");
    need(&shutdown, "dcgmShutdown");
    need(&startEmbedded, "dcgmStartEmbedded");
    need(&stopEmbedded, "dcgmStopEmbedded");
    need(&connect, "dcgmConnect_v2");
    need(&disconnect, "dcgmDisconnect");
    need(&getAllSupportedDevices, "dcgmGetAllSupportedDevices");
    need(&groupCreate, "dcgmGroupCreate");
    need(&groupDestroy, "dcgmGroupDestroy");
    need(&groupAddDevice, "dcgmGroupAddDevice");
    need(&fieldGroupCreate, "dcgmFieldGroupCreate");
    need(&fieldGroupDestroy, "dcgmFieldGroupDestroy");
    need(&watchFields, "dcgmWatchFields");
    need(&unwatchFields, "dcgmUnwatchFields");
    need(&updateAllFields, "dcgmUpdateAllFields");
    need(&entityGetLatestValues, "dcgmEntityGetLatestValues");
    errorString = dl_.symbol<errorString_fn>("errorString");
    return missing;
  }

  DlLibrary dl_;
  bool initialised_ = false;
};

}  // namespace aegis::dcgm
