// A shared library opened with dlopen and closed when its owner goes: what the NVML and
// DCGM loaders (nvml_library.h, dcgm_library.h) share. No build dependency on either.
#pragma once
#include <dlfcn.h>

#include <string>

namespace aegis {

class DlLibrary {
 public:
  DlLibrary() = default;
  ~DlLibrary() {
    if (handle_) dlclose(handle_);
  }
  DlLibrary(const DlLibrary&) = delete;
  DlLibrary& operator=(const DlLibrary&) = delete;

  // False, with `why` set to the loader's reason, when `path` cannot be loaded.
  bool open(const std::string& path, std::string* why) {
    path_ = path;
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) return true;
    const char* reason = dlerror();
    *why = reason ? reason : "unknown reason";
    return false;
  }
  // Null when the library lacks `name`. dlsym gives a data pointer; POSIX guarantees it
  // converts to a function pointer.
  template <class F>
  F symbol(const char* name) const {
    return reinterpret_cast<F>(dlsym(handle_, name));
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace aegis
