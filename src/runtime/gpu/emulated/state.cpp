#include "runtime/gpu/emulated/state.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <signal.h>
#include <stdexcept>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/gpu/emulated/state_layout.h"

namespace aegis::emu {

using layout::File;

namespace {

std::int64_t now_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double clamp01(double v) { return v > 0 ? (v < 1 ? v : 1) : 0; }  // NaN reads 0

bool valid_pid(std::uint32_t pid) { return pid > 0 && pid <= static_cast<std::uint32_t>(INT_MAX); }

// Derived per-GPU totals from the process table (the rule of the simulator's `resample`).
void recompute(File& f) {
  for (int g = 0; g < kMaxGpus; ++g) {
    f.gpus[g].used_mib = 0;
    f.gpus[g].activity = {};
  }
  for (int i = 0; i < f.process_count; ++i) {
    const auto& p = f.processes[i];
    auto& g = f.gpus[p.gpu];
    g.used_mib += p.used_mib;
    if (!p.active) continue;
    g.activity.smact += p.speed * p.solo.smact;
    g.activity.smocc += p.speed * p.solo.smocc;
    g.activity.drama += p.speed * p.solo.drama;
    g.activity.util += p.speed * p.solo.util;
  }
  for (int g = 0; g < f.gpu_count; ++g) {
    auto& a = f.gpus[g].activity;
    a = {std::min(1.0, a.smact), std::min(1.0, a.smocc), std::min(1.0, a.drama), std::min(1.0, a.util)};
  }
}

// Integrates power and activity up to now with the activity as it has been since the
// last change: every mutation calls this first, so the integrals are exact.
void advance(File& f) {
  const std::int64_t now = now_ns(CLOCK_MONOTONIC);
  if (now < f.updated_ns) f.updated_ns = now;  // the file outlived a reboot
  const double dt = static_cast<double>(now - f.updated_ns) * 1e-9;
  if (dt <= 0) return;
  for (int i = 0; i < f.gpu_count; ++i) {
    auto& g = f.gpus[i];
    g.energy_j += dt * (kPowerIdleW + (kPowerMaxW - kPowerIdleW) * g.activity.smact);
    g.integral.smact += dt * g.activity.smact;
    g.integral.smocc += dt * g.activity.smocc;
    g.integral.drama += dt * g.activity.drama;
    g.integral.util += dt * g.activity.util;
  }
  f.updated_ns = now;
}

// Copies the last entry into the hole before shrinking, so a holder killed in between
// leaves a duplicate (which `repair` removes), never a lost entry.
void remove_at(File& f, int i) {
  f.processes[i] = f.processes[f.process_count - 1];
  f.process_count--;
}

bool remove_pid(File& f, std::uint32_t pid) {
  bool any = false;
  for (int i = f.process_count - 1; i >= 0; --i)
    if (f.processes[i].pid == pid) {
      remove_at(f, i);
      any = true;
    }
  return any;
}

// Drops every entry of the processes on `gpu` that no longer exist: a job killed with
// SIGKILL frees its memory at the next reading. (A zombie still exists until reaped.)
void drop_dead(File& f, int gpu) {
  bool changed = false;
  for (int i = f.process_count - 1; i >= 0; --i) {
    if (i >= f.process_count || f.processes[i].gpu != gpu) continue;
    if (kill(static_cast<pid_t>(f.processes[i].pid), 0) == 0 || errno != ESRCH) continue;
    changed |= remove_pid(f, f.processes[i].pid);
    i = std::min(i, f.process_count);
  }
  if (changed) recompute(f);
}

int find(const File& f, int gpu, std::uint32_t pid) {
  for (int i = 0; i < f.process_count; ++i)
    if (f.processes[i].gpu == gpu && f.processes[i].pid == pid) return i;
  return -1;
}

int find_or_add(File& f, int gpu, std::uint32_t pid) {
  if (const int i = find(f, gpu, pid); i >= 0) return i;
  if (f.process_count >= kMaxProcesses) return -1;
  auto& p = f.processes[f.process_count];
  p = {};
  p.pid = pid;
  p.gpu = gpu;
  p.speed = 1;
  p.start_ns = now_ns(CLOCK_REALTIME);
  f.process_count++;  // last: the entry is complete before it is live
  return f.process_count - 1;
}

// After a holder died mid-change: keep only well-formed, unique entries, then rederive.
void repair(File& f) {
  f.gpu_count = std::clamp(f.gpu_count, 0, kMaxGpus);
  f.process_count = std::clamp(f.process_count, 0, kMaxProcesses);
  for (int i = f.process_count - 1; i >= 0; --i) {
    const auto& p = f.processes[i];
    bool bad = p.gpu < 0 || p.gpu >= f.gpu_count || !valid_pid(p.pid);
    for (int j = 0; j < i && !bad; ++j) bad = f.processes[j].gpu == p.gpu && f.processes[j].pid == p.pid;
    if (bad) remove_at(f, i);
  }
  recompute(f);
}

class Guard {
 public:
  explicit Guard(File* f) : f_(f) {
    const int rc = pthread_mutex_lock(&f->mutex);
    if (rc == EOWNERDEAD) {  // its holder died: the data may be half-changed
      repair(*f);
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

void configure(File& f, std::span<const GpuSpec> gpus) {
  const int n = static_cast<int>(gpus.size());
  advance(f);
  for (int i = 0; i < kMaxGpus; ++i) {
    auto& g = f.gpus[i];
    const MiB total = i < n ? gpus[static_cast<std::size_t>(i)].total_mib : 0;
    if (i < f.gpu_count && g.total_mib == total) continue;  // same GPU: keep its counters
    g = {};
    g.total_mib = total;
    if (i < n) {
      const std::string name = emulated_name(total);
      std::snprintf(g.name, sizeof g.name, "%s", name.c_str());
    }
  }
  f.gpu_count = n;
  for (int i = f.process_count - 1; i >= 0; --i)
    if (f.processes[i].gpu >= n) remove_at(f, i);
  recompute(f);
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
  Fd fd{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666)};
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
    configure(*f, gpus);
  }
  return s;
}

State::~State() { munmap(file_, sizeof(File)); }

int State::gpu_count() const {
  Guard g(file_);
  return file_->gpu_count;
}

std::string State::gpu_name(int gpu) const {
  Guard g(file_);
  if (gpu < 0 || gpu >= file_->gpu_count) return "";
  const auto& n = file_->gpus[gpu].name;
  return std::string(n, strnlen(n, sizeof n));
}

bool State::allocate(int gpu, std::uint32_t pid, MiB mib, MiB* free_mib) {
  Guard guard(file_);
  File& f = *file_;
  if (gpu < 0 || gpu >= f.gpu_count || mib < 0 || !valid_pid(pid)) return false;
  advance(f);
  drop_dead(f, gpu);  // memory of killed jobs is free for this allocation
  auto& g = f.gpus[gpu];
  const bool fits = g.used_mib + mib <= g.total_mib;
  const int i = fits ? find_or_add(f, gpu, pid) : -1;
  if (i >= 0) {
    f.processes[i].used_mib += mib;
    recompute(f);
  }
  if (free_mib) *free_mib = g.total_mib - g.used_mib;
  return i >= 0;
}

bool State::set_activity(int gpu, std::uint32_t pid, const Activity& solo, double speed) {
  Guard guard(file_);
  File& f = *file_;
  if (gpu < 0 || gpu >= f.gpu_count || !valid_pid(pid)) return false;
  advance(f);
  const int i = find_or_add(f, gpu, pid);
  if (i < 0) return false;
  auto& p = f.processes[i];
  p.solo = {clamp01(solo.smact), clamp01(solo.smocc), clamp01(solo.drama), clamp01(solo.util)};
  p.speed = clamp01(speed);
  p.active = 1;
  recompute(f);
  return true;
}

void State::release(std::uint32_t pid) {
  Guard guard(file_);
  advance(*file_);
  if (remove_pid(*file_, pid)) recompute(*file_);
}

CoRunners State::co_runners(int gpu, std::uint32_t pid) {
  Guard guard(file_);
  File& f = *file_;
  CoRunners c;
  if (gpu < 0 || gpu >= f.gpu_count) return c;
  advance(f);
  drop_dead(f, gpu);
  for (int i = 0; i < f.process_count; ++i) {
    const auto& p = f.processes[i];
    if (p.gpu != gpu || p.pid == pid || !p.active) continue;
    c.util += p.solo.util;
    c.drama += p.solo.drama;
  }
  return c;
}

GpuReading State::read(int gpu) {
  Guard guard(file_);
  File& f = *file_;
  GpuReading r;
  if (gpu < 0 || gpu >= f.gpu_count) return r;
  advance(f);
  drop_dead(f, gpu);
  const auto& g = f.gpus[gpu];
  r.total_mib = g.total_mib;
  r.used_mib = g.used_mib;
  r.activity = g.activity;
  r.power_w = kPowerIdleW + (kPowerMaxW - kPowerIdleW) * g.activity.smact;
  r.energy_j = g.energy_j;
  r.integral = g.integral;
  r.time_s = static_cast<double>(f.updated_ns - f.created_ns) * 1e-9;
  for (int i = 0; i < f.process_count; ++i) r.process_count += f.processes[i].gpu == gpu;
  return r;
}

std::size_t State::processes(int gpu, std::span<ProcessEntry> out) {
  Guard guard(file_);
  File& f = *file_;
  if (gpu < 0 || gpu >= f.gpu_count) return 0;
  advance(f);
  drop_dead(f, gpu);
  std::size_t n = 0;
  for (int i = 0; i < f.process_count; ++i) {
    const auto& p = f.processes[i];
    if (p.gpu != gpu) continue;
    if (n < out.size()) out[n] = {p.pid, p.used_mib};
    ++n;
  }
  return n;
}

}  // namespace aegis::emu
