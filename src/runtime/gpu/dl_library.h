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

  // Resolves a symbol the caller requires into `out`; the first one missing is kept in
  // `missing`.
  template <class F>
  void need(F* out, const char* name, const char*& missing) const {
    *out = symbol<F>(name);
    if (!*out && !missing) missing = name;
  }

  // The steps of every GPU library loader, each failure one line naming `api` and the
  // path: load `path` (`load_hint` follows the loader's reason), resolve its symbols
  // (`resolve()` gives the first required one missing, or null) and initialise it
  // (`init()` gives "" or why it failed).
  template <class Resolve, class Init>
  bool load(const std::string& path, const std::string& api, const std::string& load_hint, Resolve resolve,
            Init init, std::string* error) {
    if (std::string why; !open(path, &why)) {
      *error = "cannot load " + api + " from '" + path + "' (" + why + ")" + load_hint;
      return false;
    }
    if (const char* missing = resolve()) {
      *error = "'" + path + "' is not a usable " + api + " library: it lacks " + missing;
      return false;
    }
    if (const std::string why = init(); !why.empty()) {
      *error = api + " from '" + path + "' failed to initialise: " + why;
      return false;
    }
    return true;
  }

 private:
  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace aegis
