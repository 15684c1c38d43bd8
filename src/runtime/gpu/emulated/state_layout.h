// The bytes of the shared state file, for State's implementation (and the tests that damage
// it). Fixed-size tables so the file never moves; any change to this layout must bump
// kVersion, since a file made by another build is refused rather than misread. Nothing in
// it is trusted: every user can write it (state.h), so readers check every count and index.
#pragma once
#include <cstddef>
#include <cstdint>

#include "runtime/gpu/emulated/device_ids.h"
#include "runtime/gpu/emulated/state.h"

namespace aegis::emu::layout {

inline constexpr std::uint64_t kMagic = 0x554d456967656100ULL;  // "\0aegiEMU", written last at creation
// 2: MIG instances; 3: MPS clients; 4: their server; 5: no mutex inside (a flock instead), `writer`
inline constexpr std::uint32_t kVersion = 5;
inline constexpr int kNameBytes = 64;
inline constexpr int kProfileBytes = 16;

// A whole GPU or a MIG instance, at its device id (device_ids.h).
struct Device {
  std::int64_t total_mib;  // an instance: 0 when its slot is empty
  char name[kNameBytes];   // GPUs; an instance's is its GPU's plus " MIG <profile>"
  char profile[kProfileBytes];  // instances: "3g.20gb"
  std::int32_t slices;          // instances: its share of the GPU's SMs, in sevenths
  std::int32_t mig;             // GPUs: 1 in MIG mode (its instances are the CUDA devices)
  // Derived from the process table after every change (never the source of truth).
  std::int64_t used_mib;  // a GPU in MIG mode: the sum over its instances
  Activity raw;           // speed-weighted sum of its processes' solo activity, uncapped
  Activity activity;      // as measured: raw capped at 1 (an instance: raw / its SM share)
  // Integrated over wall time up to File::updated_ns.
  double energy_j;  // GPUs
  Activity integral;
};

struct Process {
  std::uint32_t pid;
  std::int32_t device;
  std::int64_t used_mib;
  Activity solo;       // activity alone on a whole GPU; meaningful once `active`
  double speed;        // weight of `solo` in the device's totals
  std::uint32_t active;
  std::uint32_t mps_client;  // an MPS client: its MPS server's pid (kNoServer: unknown); 0: no client
  std::int64_t start_ns;  // CLOCK_REALTIME when the entry was made
};

struct File {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t bytes;  // sizeof(File) of the build that made it
  // The pid of a process part-way through writing its change back (0: none): set before the
  // first write and cleared by the last, so one killed in between leaves it set and the next
  // locker repairs the table (what a robust mutex's EOWNERDEAD told the builds before 5).
  std::uint32_t writer;
  std::uint32_t reserved;
  std::int64_t created_ns;  // CLOCK_MONOTONIC
  std::int64_t updated_ns;  // integrals are current up to here
  std::int32_t gpu_count;
  std::int32_t process_count;  // processes[0, process_count) are live, in no order
  Device devices[kMaxDevices];
  Process processes[kMaxProcesses];
};

// Where the fixed header ends and the device table starts.
inline constexpr std::size_t kHeaderBytes = offsetof(File, devices);

}  // namespace aegis::emu::layout
