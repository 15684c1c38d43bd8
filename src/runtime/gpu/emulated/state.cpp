// State's operations on the table (state.h), each one Session: locked, loaded, checked,
// and committed when it changed something. The file access is state_file.cpp.
#include "runtime/gpu/emulated/state.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>

#include "runtime/gpu/emulated/state_table.h"

namespace aegis::emu {

using layout::File;

namespace {

double clamp01(double v) { return v > 0 ? (v < 1 ? v : 1) : 0; }  // NaN reads 0

bool valid_pid(std::uint32_t pid) { return pid > 0 && pid <= static_cast<std::uint32_t>(INT_MAX); }

// Whether a process on `where` counts on `device`: its own, or one of its GPU's instances.
bool on(int where, int device) { return where == device || (!is_mig_device(device) && gpu_of(where) == device); }

}  // namespace

// One call's hold on the state: this process's threads excluded, the file's lock taken
// (bounded), the parts in use read and checked; commit() writes the change back.
class State::Session {
 public:
  explicit Session(const State& s) : s_(s), guard_(s.mu_) {
    s_.lock();
    try {
      s_.load();
    } catch (...) {
      s_.unlock();
      throw;
    }
  }
  ~Session() { s_.unlock(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  File& file() const { return *s_.file_; }
  void commit() const { s_.store(); }

 private:
  const State& s_;
  std::lock_guard<std::mutex> guard_;
};

int State::gpu_count() const {
  const Session s(*this);
  return s.file().gpu_count;
}

DeviceInfo State::device(int device) const {
  const Session s(*this);
  const File& f = s.file();
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
  const Session session(*this);
  std::vector<int> out;
  for (int s = 0; s < kMigSlices && gpu >= 0 && gpu < kMaxGpus; ++s)
    if (table::exists(session.file(), mig_device(gpu, s))) out.push_back(mig_device(gpu, s));
  return out;
}

bool State::set_mig(std::span<const MigGpu> layout, std::string* error) {
  const Session s(*this);
  File& f = s.file();
  std::vector<MiB> totals;
  for (int i = 0; i < f.gpu_count; ++i) totals.push_back(f.devices[i].total_mib);
  *error = check_mig_layout(layout, totals);
  if (!error->empty()) return false;
  table::configure_mig(f, layout);
  s.commit();
  remember_machine();
  return true;
}

bool State::allocate(int device, std::uint32_t pid, MiB mib, MiB* free_mib) {
  const Session s(*this);
  File& f = s.file();
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
  s.commit();
  if (free_mib) *free_mib = d.total_mib - d.used_mib;
  return i >= 0;
}

bool State::set_activity(int device, std::uint32_t pid, const Activity& solo, double speed) {
  const Session s(*this);
  File& f = s.file();
  if (!table::cuda_device(f, device) || !valid_pid(pid)) return false;
  table::advance(f);
  const int i = table::find_or_add(f, device, pid);
  if (i < 0) {
    s.commit();  // advanced
    return false;
  }
  auto& p = f.processes[i];
  p.solo = {clamp01(solo.smact), clamp01(solo.smocc), clamp01(solo.drama), clamp01(solo.util)};
  p.speed = clamp01(speed);
  p.active = 1;
  table::recompute(f);
  s.commit();
  return true;
}

void State::release(std::uint32_t pid) {
  const Session s(*this);
  table::advance(s.file());
  if (table::remove_pid(s.file(), pid)) table::recompute(s.file());
  s.commit();
}

CoRunners State::co_runners(int device, std::uint32_t pid) {
  const Session s(*this);
  File& f = s.file();
  CoRunners c;
  if (!table::cuda_device(f, device)) return c;
  table::advance(f);
  if (table::drop_dead(f, device)) s.commit();
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
  const Session s(*this);
  File& f = s.file();
  GpuReading r;
  if (!table::exists(f, device)) return r;
  // Brought up to now in this copy alone unless a process went: the integrals of the
  // activity since the last change come out the same whoever advances them next.
  table::advance(f);
  if (table::drop_dead(f, device)) s.commit();
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
  const Session s(*this);
  File& f = s.file();
  for (int i = 0; i < f.process_count; ++i)
    if (f.processes[i].pid == pid) f.processes[i].mps_client = server == 0 ? kNoServer : server;
  s.commit();
}

std::size_t State::processes(int device, std::span<ProcessEntry> out) {
  const Session s(*this);
  File& f = s.file();
  if (!table::exists(f, device)) return 0;
  table::advance(f);
  if (table::drop_dead(f, device)) s.commit();
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
