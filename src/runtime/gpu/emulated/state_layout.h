// The bytes of the shared state file, for State's implementation (and the test that dies
// holding the lock). Fixed-size tables so the file never moves; any change to this layout
// must bump kVersion, since a file made by another build is refused rather than misread.
#pragma once
#include <cstdint>
#include <pthread.h>

#include "runtime/gpu/emulated/state.h"

namespace aegis::emu::layout {

inline constexpr std::uint64_t kMagic = 0x554d456967656100ULL;  // "\0aegiEMU", written last at creation
inline constexpr std::uint32_t kVersion = 1;
inline constexpr int kNameBytes = 64;

struct Gpu {
  std::int64_t total_mib;
  char name[kNameBytes];
  // Derived from the process table after every change (never the source of truth).
  std::int64_t used_mib;
  Activity activity;
  // Integrated over wall time up to File::updated_ns.
  double energy_j;
  Activity integral;
};

struct Process {
  std::uint32_t pid;
  std::int32_t gpu;
  std::int64_t used_mib;
  Activity solo;       // activity alone; meaningful once `active`
  double speed;        // weight of `solo` in the GPU's totals
  std::uint32_t active;
  std::uint32_t unused;
  std::int64_t start_ns;  // CLOCK_REALTIME when the entry was made
};

struct File {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t bytes;  // sizeof(File) of the build that made it
  pthread_mutex_t mutex;  // process-shared, robust
  std::int64_t created_ns;  // CLOCK_MONOTONIC
  std::int64_t updated_ns;  // integrals are current up to here
  std::int32_t gpu_count;
  std::int32_t process_count;  // processes[0, process_count) are live, in no order
  Gpu gpus[kMaxGpus];
  Process processes[kMaxProcesses];
};

}  // namespace aegis::emu::layout
