#include "runtime/gpu/emulated/state.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/gpu/emulated/state_table.h"

namespace aegis::emu {

using layout::File;
using table::now_ns;

namespace {

double clamp01(double v) { return v > 0 ? (v < 1 ? v : 1) : 0; }  // NaN reads 0

bool valid_pid(std::uint32_t pid) { return pid > 0 && pid <= static_cast<std::uint32_t>(INT_MAX); }

// Whether a process on `where` counts on `device`: its own, or one of its GPU's instances.
bool on(int where, int device) { return where == device || (!is_mig_device(device) && gpu_of(where) == device); }

class Guard {
 public:
  explicit Guard(File* f) : f_(f) {
    const int rc = pthread_mutex_lock(&f->mutex);
    if (rc == EOWNERDEAD) {  // its holder died: the data may be half-changed
      table::repair(*f);
      pthread_mutex_consistent(&f->mutex);
    } else if (rc != 0) {
      throw std::runtime_error(std::string("emulated GPU state: cannot lock: ") + std::strerror(rc));
    }
  }
  ~Guard() { pthread_mutex_unlock(&f_->mutex); }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  File* f_;
};

bool init_mutex(pthread_mutex_t* m) {
  pthread_mutexattr_t a;
  if (pthread_mutexattr_init(&a) != 0) return false;
  const bool ok = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) == 0 &&
                  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) == 0 && pthread_mutex_init(m, &a) == 0;
  pthread_mutexattr_destroy(&a);
  return ok;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd < 0) return;
    // Unlocked explicitly: the mapping keeps the open file alive, and with it the flock.
    flock(fd, LOCK_UN);
    ::close(fd);
  }
};

}  // namespace

std::unique_ptr<State> State::open(const std::string& path, std::span<const GpuSpec> gpus, std::string* error) {
  const std::string where = "emulated GPU state '" + path + "': ";
  auto fail = [&](const std::string& why) {
    *error = where + why;
    return nullptr;
  };
  if (path.empty()) return fail("no path (set AEGIS_EMULATED_STATE)");
  if (gpus.size() > static_cast<std::size_t>(kMaxGpus)) return fail("more than 64 GPUs");
  Fd fd{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666)};
  if (fd.fd < 0) return fail(std::strerror(errno));
  // Creation is serialised with flock (released on return and on death), so two processes
  // starting together neither both initialise the mutex nor see a half-made file.
  if (flock(fd.fd, LOCK_EX) != 0) return fail(std::string("flock: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) return fail(std::strerror(errno));
  if (st.st_size == 0) {
    if (ftruncate(fd.fd, sizeof(File)) != 0) return fail(std::string("resize: ") + std::strerror(errno));
    // Open to every user, as /dev/nvidia* is: jobs run under their owners' uids.
    if (st.st_uid == geteuid()) fchmod(fd.fd, 0666);
  }
  if (st.st_size != 0 && st.st_size != static_cast<off_t>(sizeof(File)))
    return fail("made by another build (" + std::to_string(st.st_size) + " bytes, this one uses " +
                std::to_string(sizeof(File)) + "); delete it");
  void* p = mmap(nullptr, sizeof(File), PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (p == MAP_FAILED) return fail(std::string("mmap: ") + std::strerror(errno));
  auto* f = static_cast<File*>(p);
  std::string why;
  if (f->magic == 0) {  // new, or its creator died before finishing: nobody else uses it
    std::memset(static_cast<void*>(f), 0, sizeof(File));
    f->version = layout::kVersion;
    f->bytes = sizeof(File);
    f->created_ns = f->updated_ns = now_ns(CLOCK_MONOTONIC);
    if (!init_mutex(&f->mutex)) why = "cannot make a robust process-shared mutex";
    else f->magic = layout::kMagic;
  } else if (f->magic != layout::kMagic) {
    why = "not an aegis emulated GPU state file";
  } else if (f->version != layout::kVersion || f->bytes != sizeof(File)) {
    why = "made by another build (layout version " + std::to_string(f->version) + "); delete it";
  }
  if (!why.empty()) {
    munmap(p, sizeof(File));
    return fail(why);
  }
  std::unique_ptr<State> s(new State(path, f));
  if (!gpus.empty()) {
    Guard g(f);
    table::configure_gpus(*f, gpus);
  }
  return s;
}

State::~State() { munmap(file_, sizeof(File)); }

int State::gpu_count() const {
  Guard g(file_);
  return file_->gpu_count;
}

DeviceInfo State::device(int device) const {
  Guard g(file_);
  const File& f = *file_;
  DeviceInfo info;
  if (!table::exists(f, device)) return info;
  const auto& d = f.devices[device];
  info.total_mib = d.total_mib;
  info.mig_mode = !is_mig_device(device) && d.mig;
  info.name.assign(d.name, strnlen(d.name, sizeof d.name));
  info.profile.assign(d.profile, strnlen(d.profile, sizeof d.profile));
  if (is_mig_device(device))
    info.sm_share = instance_sm_share(f.devices[gpu_of(device)].total_mib, info.profile, d.slices);
  return info;
}

std::vector<int> State::instances(int gpu) const {
  Guard g(file_);
  std::vector<int> out;
  for (int s = 0; s < kMigSlices && gpu >= 0 && gpu < kMaxGpus; ++s)
    if (table::exists(*file_, mig_device(gpu, s))) out.push_back(mig_device(gpu, s));
  return out;
}

bool State::set_mig(std::span<const MigGpu> layout, std::string* error) {
  Guard g(file_);
  File& f = *file_;
  std::vector<MiB> totals;
  for (int i = 0; i < f.gpu_count; ++i) totals.push_back(f.devices[i].total_mib);
  *error = check_mig_layout(layout, totals);
  if (!error->empty()) return false;
  table::configure_mig(f, layout);
  return true;
}

bool State::allocate(int device, std::uint32_t pid, MiB mib, MiB* free_mib) {
  Guard guard(file_);
  File& f = *file_;
  if (!table::cuda_device(f, device) || mib < 0 || !valid_pid(pid)) return false;
  table::advance(f);
  table::drop_dead(f, device);  // memory of killed jobs is free for this allocation
  auto& d = f.devices[device];
  const bool fits = d.used_mib + mib <= d.total_mib;
  const int i = fits ? table::find_or_add(f, device, pid) : -1;
  if (i >= 0) {
    f.processes[i].used_mib += mib;
    table::recompute(f);
  }
  if (free_mib) *free_mib = d.total_mib - d.used_mib;
  return i >= 0;
}

bool State::set_activity(int device, std::uint32_t pid, const Activity& solo, double speed) {
  Guard guard(file_);
  File& f = *file_;
  if (!table::cuda_device(f, device) || !valid_pid(pid)) return false;
  table::advance(f);
  const int i = table::find_or_add(f, device, pid);
  if (i < 0) return false;
  auto& p = f.processes[i];
  p.solo = {clamp01(solo.smact), clamp01(solo.smocc), clamp01(solo.drama), clamp01(solo.util)};
  p.speed = clamp01(speed);
  p.active = 1;
  table::recompute(f);
  return true;
}

void State::release(std::uint32_t pid) {
  Guard guard(file_);
  table::advance(*file_);
  if (table::remove_pid(*file_, pid)) table::recompute(*file_);
}

CoRunners State::co_runners(int device, std::uint32_t pid) {
  Guard guard(file_);
  File& f = *file_;
  CoRunners c;
  if (!table::cuda_device(f, device)) return c;
  table::advance(f);
  table::drop_dead(f, device);
  for (int i = 0; i < f.process_count; ++i) {
    const auto& p = f.processes[i];
    if (p.device != device || p.pid == pid || !p.active) continue;
    c.util += p.solo.util;
    c.drama += p.solo.drama;
    c.smact += p.solo.smact;
  }
  return c;
}

GpuReading State::read(int device) {
  Guard guard(file_);
  File& f = *file_;
  GpuReading r;
  if (!table::exists(f, device)) return r;
  table::advance(f);
  table::drop_dead(f, device);
  const auto& d = f.devices[device];
  r.total_mib = d.total_mib;
  r.used_mib = d.used_mib;
  r.activity = d.activity;
  if (!is_mig_device(device)) {
    r.power_w = kPowerIdleW + (kPowerMaxW - kPowerIdleW) * d.activity.smact;
    r.energy_j = d.energy_j;
  }
  r.integral = d.integral;
  r.time_s = static_cast<double>(f.updated_ns - f.created_ns) * 1e-9;
  for (int i = 0; i < f.process_count; ++i) r.process_count += on(f.processes[i].device, device);
  return r;
}

void State::mark_mps_client(std::uint32_t pid, std::uint32_t server) {
  Guard guard(file_);
  File& f = *file_;
  for (int i = 0; i < f.process_count; ++i)
    if (f.processes[i].pid == pid) f.processes[i].mps_client = server == 0 ? kNoServer : server;
}

std::size_t State::processes(int device, std::span<ProcessEntry> out) {
  Guard guard(file_);
  File& f = *file_;
  if (!table::exists(f, device)) return 0;
  table::advance(f);
  table::drop_dead(f, device);
  std::size_t n = 0;
  for (int i = 0; i < f.process_count; ++i) {
    const auto& p = f.processes[i];
    if (!on(p.device, device)) continue;
    const double util = p.active ? std::min(1.0, p.solo.util * p.speed) : 0.0;
    if (n < out.size()) out[n] = {p.pid, p.used_mib, p.device, p.mps_client != 0, p.mps_client, util};
    ++n;
  }
  return n;
}

}  // namespace aegis::emu
