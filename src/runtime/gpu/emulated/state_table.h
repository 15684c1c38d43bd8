// The rules on the shared table, for State's implementation: what is derived from the
// process table, how time is integrated, which entries are dropped, and how the GPU and
// MIG tables are (re)configured. Every function expects the caller to hold the lock.
#pragma once
#include <ctime>
#include <span>

#include "runtime/gpu/emulated/state_layout.h"

namespace aegis::emu::table {

using layout::Device;
using layout::File;

std::int64_t now_ns(clockid_t clock);

// A device that exists now: a configured GPU, or a filled slot of a GPU in MIG mode.
bool exists(const File& f, int device);
// A device CUDA can allocate on: a GPU off MIG mode, or a MIG instance.
bool cuda_device(const File& f, int device);
// Calls fn(device id, Device&) for every device that exists, GPUs first.
template <class F>
void for_each_device(File& f, F&& fn) {
  for (int g = 0; g < f.gpu_count; ++g) {
    fn(g, f.devices[g]);
    if (!f.devices[g].mig) continue;
    for (int s = 0; s < kMigSlices; ++s)
      if (f.devices[mig_device(g, s)].total_mib > 0) fn(mig_device(g, s), f.devices[mig_device(g, s)]);
  }
}

// Device totals from the process table (the rule of the simulator's `resample`).
void recompute(File& f);
// Integrates power and activity up to now with the activity as it has been since the
// last change: every mutation calls this first, so the integrals are exact.
void advance(File& f);

int find(const File& f, int device, std::uint32_t pid);
// The entry of `pid` on `device`, made if missing; -1 when the table is full.
int find_or_add(File& f, int device, std::uint32_t pid);
bool remove_pid(File& f, std::uint32_t pid);
// Drops the entries of processes on `device`'s GPU (instances included) that no longer
// exist: a job killed with SIGKILL frees its memory at the next reading. True if any went.
bool drop_dead(File& f, int device);
// After a holder died mid-change: keep only well-formed, unique entries, then rederive.
void repair(File& f);

void configure_gpus(File& f, std::span<const GpuSpec> gpus);
void configure_mig(File& f, std::span<const MigGpu> layout);

}  // namespace aegis::emu::table
