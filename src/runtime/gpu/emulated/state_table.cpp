#include "runtime/gpu/emulated/state_table.h"
#include "core/busy_union.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <ctime>
#include <signal.h>

namespace aegis::emu::table {

namespace {

bool valid_pid(std::uint32_t pid) { return pid > 0 && pid <= static_cast<std::uint32_t>(INT_MAX); }

void add(Activity& sum, const Activity& a, double weight) {
  sum.smact += weight * a.smact;
  sum.smocc += weight * a.smocc;
  sum.drama += weight * a.drama;
  sum.util += weight * a.util;
}

// Co-located processes' activity: SM activity, occupancy and DRAM activity add up (each
// counts issuing warps or bytes, which the processes share); coarse utilisation is the
// union of their busy periods (core/busy_union.h).
void combine(Activity& gpu, const Activity& a, double speed) {
  const double util = gpu.util;
  add(gpu, a, speed);
  gpu.util = 1.0 - idle_after(1.0 - util, speed * a.util);
}

Activity capped(const Activity& a, double share) {
  auto cap = [&](double v) { return std::min(1.0, v / share); };
  return {cap(a.smact), cap(a.smocc), cap(a.drama), cap(a.util)};
}

// Copies the last entry into the hole before shrinking, so a holder killed in between
// leaves a duplicate (which `repair` removes), never a lost entry.
void remove_at(File& f, int i) {
  f.processes[i] = f.processes[f.process_count - 1];
  f.process_count--;
}

// Drops every entry on a device that is no longer one CUDA can use.
void drop_orphans(File& f) {
  for (int i = f.process_count - 1; i >= 0; --i)
    if (!cuda_device(f, f.processes[i].device)) remove_at(f, i);
}

void clear_instances(File& f, int gpu) {
  for (int s = 0; s < kMigSlices; ++s) f.devices[mig_device(gpu, s)] = {};
  f.devices[gpu].mig = 0;
}

std::string profile_of(const Device& d) { return {d.profile, strnlen(d.profile, sizeof d.profile)}; }

// What `gpu`'s instances are now, by profile name (for comparing with a new layout).
std::vector<std::string> current_instances(const File& f, int gpu) {
  std::vector<std::string> out;
  for (int s = 0; s < kMigSlices; ++s) {
    const Device& d = f.devices[mig_device(gpu, s)];
    if (d.total_mib > 0) out.push_back(profile_of(d));
  }
  return out;
}

std::vector<std::string> names_of(const std::vector<MigProfile>& instances) {
  std::vector<std::string> out;
  for (const auto& p : instances) out.push_back(p.name());
  return out;
}

}  // namespace

std::int64_t now_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool exists(const File& f, int device) {
  if (device < 0 || device >= kMaxDevices) return false;
  const int gpu = gpu_of(device);
  if (gpu >= f.gpu_count) return false;
  return !is_mig_device(device) || (f.devices[gpu].mig && f.devices[device].total_mib > 0);
}

bool cuda_device(const File& f, int device) {
  return exists(f, device) && (is_mig_device(device) || !f.devices[device].mig);
}

void recompute(File& f) {
  for_each_device(f, [](int, Device& d) {
    d.used_mib = 0;
    d.raw = d.activity = {};
  });
  for (int i = 0; i < f.process_count; ++i) {
    const auto& p = f.processes[i];
    Device& d = f.devices[p.device];
    d.used_mib += p.used_mib;
    if (p.active) combine(d.raw, p.solo, p.speed);
  }
  // A GPU in MIG mode holds what its instances hold and does what they do. Its own SMs
  // are the whole chip; an instance's are its profile's (mig_models.h).
  for_each_device(f, [&](int id, Device& d) {
    if (!is_mig_device(id)) return;
    Device& gpu = f.devices[gpu_of(id)];
    gpu.used_mib += d.used_mib;
    combine(gpu.raw, d.raw, 1);
  });
  for_each_device(f, [&](int id, Device& d) {
    const double share =
        is_mig_device(id) ? instance_sm_share(f.devices[gpu_of(id)].total_mib, profile_of(d), d.slices) : 1.0;
    d.activity = capped(d.raw, share);
  });
}

void advance(File& f) {
  const std::int64_t now = now_ns(CLOCK_MONOTONIC);
  if (now < f.updated_ns) f.updated_ns = now;  // the file outlived a reboot
  const double dt = static_cast<double>(now - f.updated_ns) * 1e-9;
  if (dt <= 0) return;
  for_each_device(f, [&](int id, Device& d) {
    if (!is_mig_device(id)) d.energy_j += dt * (kPowerIdleW + (kPowerMaxW - kPowerIdleW) * d.activity.smact);
    add(d.integral, d.activity, dt);
  });
  f.updated_ns = now;
}

int find(const File& f, int device, std::uint32_t pid) {
  for (int i = 0; i < f.process_count; ++i)
    if (f.processes[i].device == device && f.processes[i].pid == pid) return i;
  return -1;
}

int find_or_add(File& f, int device, std::uint32_t pid) {
  if (const int i = find(f, device, pid); i >= 0) return i;
  if (f.process_count >= kMaxProcesses) return -1;
  auto& p = f.processes[f.process_count];
  p = {};
  p.pid = pid;
  p.device = device;
  p.speed = 1;
  p.start_ns = now_ns(CLOCK_REALTIME);
  f.process_count++;  // last: the entry is complete before it is live
  return f.process_count - 1;
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

// (A zombie still exists until reaped.)
bool drop_dead(File& f, int device) {
  const int gpu = gpu_of(device);
  bool changed = false;
  for (int i = f.process_count - 1; i >= 0; --i) {
    if (i >= f.process_count || gpu_of(f.processes[i].device) != gpu) continue;
    if (kill(static_cast<pid_t>(f.processes[i].pid), 0) == 0 || errno != ESRCH) continue;
    changed |= remove_pid(f, f.processes[i].pid);
    i = std::min(i, f.process_count);
  }
  if (changed) recompute(f);
  return changed;
}

void repair(File& f) {
  f.gpu_count = std::clamp(f.gpu_count, 0, kMaxGpus);
  f.process_count = std::clamp(f.process_count, 0, kMaxProcesses);
  for (int i = f.process_count - 1; i >= 0; --i) {
    const auto& p = f.processes[i];
    bool bad = !cuda_device(f, p.device) || !valid_pid(p.pid);
    for (int j = 0; j < i && !bad; ++j) bad = f.processes[j].device == p.device && f.processes[j].pid == p.pid;
    if (bad) remove_at(f, i);
  }
  recompute(f);
}

void configure_gpus(File& f, std::span<const GpuSpec> gpus) {
  const int n = static_cast<int>(gpus.size());
  advance(f);
  for (int i = 0; i < kMaxGpus; ++i) {
    auto& g = f.devices[i];
    const MiB total = i < n ? gpus[static_cast<std::size_t>(i)].total_mib : 0;
    if (i < f.gpu_count && g.total_mib == total) continue;  // same GPU: keep its counters and layout
    g = {};
    clear_instances(f, i);
    g.total_mib = total;
    if (i < n) std::snprintf(g.name, sizeof g.name, "%s", emulated_name(total).c_str());
  }
  f.gpu_count = n;
  drop_orphans(f);
  recompute(f);
}

void configure_mig(File& f, std::span<const MigGpu> layout) {
  advance(f);
  for (int g = 0; g < f.gpu_count; ++g) {
    const auto want = std::find_if(layout.begin(), layout.end(), [&](const MigGpu& m) { return m.gpu == g; });
    const bool mig = want != layout.end();
    if (mig == static_cast<bool>(f.devices[g].mig) && (!mig || current_instances(f, g) == names_of(want->instances))) continue;
    // A changed GPU starts afresh: its processes go (those on the whole GPU too).
    for (int i = f.process_count - 1; i >= 0; --i)
      if (gpu_of(f.processes[i].device) == g) remove_at(f, i);
    clear_instances(f, g);
    if (!mig) continue;
    f.devices[g].mig = 1;
    const std::string gpu_name(f.devices[g].name, strnlen(f.devices[g].name, sizeof f.devices[g].name));
    for (std::size_t s = 0; s < want->instances.size(); ++s) {
      const MigProfile& p = want->instances[s];
      Device& d = f.devices[mig_device(g, static_cast<int>(s))];
      d.total_mib = instance_memory_mib(f.devices[g].total_mib, p);
      d.slices = p.slices;
      std::snprintf(d.profile, sizeof d.profile, "%s", p.name().c_str());
      std::snprintf(d.name, sizeof d.name, "%s", (gpu_name + " MIG " + p.name()).c_str());
    }
  }
  recompute(f);
}

}  // namespace aegis::emu::table
