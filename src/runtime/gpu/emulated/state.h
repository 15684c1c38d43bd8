// The emulated GPUs' shared state: a file that every process playing a part (the emulated
// NVML library, fake jobs, tests) reads and writes, holding the devices (GPUs and their MIG
// instances, numbered as in device_ids.h) and a process table. Processes that no longer
// exist are dropped when read.
//
// Every user may write the file (mode 0666, as /dev/nvidia*: jobs run under their owners'
// uids), so a hostile one can hold its lock, truncate it or fill it with garbage while a
// root aegisd reads it (issue 33 item 5; docs/security.md, defence 15).
// Hence, by design:
// - a kernel lock (flock), never a mutex inside the file: a lock word any user can write
//   lets them corrupt the robust-list pointers a holder's thread follows; and the lock is
//   waited for at most a bounded time (lock_wait below), after which the call fails with
//   StateError naming the held lock: no user can freeze a reader;
// - pread/pwrite of the parts in use into a private copy, never a mapping: a mapped file
//   truncated under its reader kills it with SIGBUS, and no size check made before an access
//   closes that race (a signal handler could, but would have to longjmp out of any access
//   in any library call); a short read is reported as a truncated file instead. The price:
//   about 5 us a call (a flock pair and two preads; a reader that changes nothing writes
//   nothing);
// - each count and index read is checked before use, and a file damaged (truncated, header
//   overwritten) is restored only by a process running as its owner (aegisd, which made
//   it), with the devices that process configured or found at open, at its next call;
// - a file is adopted only if owned by this user or root (checked on the descriptor opened
//   with O_NOFOLLOW; a regular file with one link): another user's file is refused with one
//   line naming its owner.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "core/units.h"
#include "runtime/gpu/emulated/device_ids.h"
#include "runtime/gpu/emulated/gpu_spec.h"
#include "runtime/gpu/emulated/mig_spec.h"

namespace aegis::emu {

inline constexpr int kMaxProcesses = 1024;
// An MPS client whose server's pid is not known (no control daemon pid file).
inline constexpr std::uint32_t kNoServer = 0xffffffffu;
// What a real MPS server holds on each GPU it serves (nvml-calls/ of the H200 run: 66 MiB).
inline constexpr MiB kMpsServerMib = 66;

// Power model, the simulator's defaults (src/sim/sim_config.h; the tests check they agree):
// idle + (max - idle) * SM activity.
inline constexpr double kPowerIdleW = 50;
inline constexpr double kPowerMaxW = 400;

// One process's (or one GPU's) activity, each in [0,1].
struct Activity {
  double smact = 0, smocc = 0, drama = 0, util = 0;
};

struct GpuReading {
  MiB total_mib = 0;
  MiB used_mib = 0;         // sum of its processes' memory (a GPU in MIG mode: of its instances')
  Activity activity;        // as measured (see State::set_activity), each capped at 1
  double power_w = 0;       // GPUs only
  double energy_j = 0;      // since the state file was created; GPUs only
  Activity integral;        // activity-seconds since creation (GPM: mean between readings)
  double time_s = 0;        // seconds since creation, the instant of this reading
  int process_count = 0;
};

// Left uninitialised by default: callers keep large buffers of these on the stack.
struct ProcessEntry {
  std::uint32_t pid;
  MiB used_mib;
  std::int32_t device;  // where it runs: on a GPU in MIG mode, which instance
  bool mps_client;      // connected through MPS: NVML lists it among the MPS processes
  std::uint32_t mps_server;  // then its MPS server's pid (kNoServer: unknown)
  double util;          // its share of the device's time running kernels now ([0,1]; 0 before its first kernel)
};

// Sums over the other active processes of one device, as the interference model (and
// MPS's SM saturation) takes them: solo values.
struct CoRunners {
  double util = 0, drama = 0, smact = 0;
};

// What a device id (device_ids.h) is on this machine now.
struct DeviceInfo {
  MiB total_mib = 0;        // 0: no such device (or an empty MIG slot)
  bool mig_mode = false;    // a GPU in MIG mode: its instances are the CUDA devices, it is not one
  double sm_share = 1;      // an instance's share of the GPU's SMs (its profile's, mig_models.h)
  std::string name;
  std::string profile;      // an instance: "3g.20gb"
  bool exists() const { return total_mib > 0; }
  // Where CUDA can allocate: a GPU off MIG, or a MIG instance.
  bool cuda_device() const { return exists() && !mig_mode; }
  double sm_fraction() const { return sm_share; }
};

namespace layout {
struct File;
}

// A call that could not reach the state: its lock held past the bounded wait, or the file
// damaged (truncated, overwritten). what() is one line naming the file and the cause.
class StateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How long a call waits for the file's lock before failing. An honest holder keeps it for
// microseconds; 1 s leaves three orders of magnitude for a holder preempted on a loaded
// machine and bounds what a user holding it can stall a reader (AEGIS_EMULATED_LOCK_WAIT_MS,
// docs/emulated-gpu.md).
inline constexpr std::chrono::milliseconds kDefaultLockWait{1000};

class State {
 public:
  // Opens `path`, creating and sizing it if missing. With `gpus` non-empty, (re)configures
  // the GPU table to them (processes on GPUs that vanish are dropped; a GPU that changes
  // leaves MIG mode). Returns null and sets `error` to one line when the file cannot be used
  // (another user's, a link, another build's, its lock held). `lock_wait`: unset, the
  // environment's AEGIS_EMULATED_LOCK_WAIT_MS or kDefaultLockWait. Every other call throws
  // StateError when the file cannot be reached (see the top of this header).
  static std::unique_ptr<State> open(const std::string& path, std::span<const GpuSpec> gpus, std::string* error,
                                     std::chrono::milliseconds lock_wait = std::chrono::milliseconds{-1});
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  int gpu_count() const;
  DeviceInfo device(int device) const;
  // The device ids of `gpu`'s MIG instances, in slot order (empty off MIG mode).
  std::vector<int> instances(int gpu) const;
  // Puts the GPUs `layout` lists in MIG mode with those instances and the others out of
  // it. A GPU whose layout changes loses its processes (a real GPU must be idle for it).
  // False, changing nothing, with `error` set to one line, when the layout does not fit.
  bool set_mig(std::span<const MigGpu> layout, std::string* error);
  const std::string& path() const { return path_; }

  // Adds `mib` to what `pid` holds on `device`; false (and nothing held) when the device's
  // used memory plus `mib` would exceed its total: the emulated out-of-memory. Also false
  // for a device CUDA cannot use (none, or a GPU in MIG mode). `free_mib`, when given,
  // receives the device's free memory at the decision.
  bool allocate(int device, std::uint32_t pid, MiB mib, MiB* free_mib = nullptr);
  // Sets the solo activity of `pid` on `device` (registering it there) and its current
  // speed: the device shows the speed-weighted sum of its processes' solo activity, an
  // instance with a fraction f of the SMs that sum / f, capped at 1. False for a device
  // CUDA cannot use or a full table.
  bool set_activity(int device, std::uint32_t pid, const Activity& solo, double speed = 1.0);
  // Marks every entry of `pid` as a client of the MPS server `server` (a pid, or kNoServer):
  // NVML then lists it in both process lists and the server in the compute list, and
  // reports its utilisation against the server, as a real driver does.
  void mark_mps_client(std::uint32_t pid, std::uint32_t server = kNoServer);
  // Drops every entry of `pid`.
  void release(std::uint32_t pid);
  CoRunners co_runners(int device, std::uint32_t pid);

  // Totals of one device now (zeros for one that does not exist).
  GpuReading read(int device);
  // The processes on `device` (a GPU in MIG mode: on its instances): fills up to
  // `out.size()` entries, returns how many there are.
  std::size_t processes(int device, std::span<ProcessEntry> out);

 private:
  class Session;
  State(std::string path, int fd, uid_t owner, std::chrono::milliseconds lock_wait);
  void lock() const;    // the file's flock, waited for at most lock_wait_; StateError past it
  void unlock() const;
  void load() const;    // the parts in use into file_, checked; StateError when damaged
  void store() const;   // file_'s parts in use back, marked with `writer` while written
  void remember_machine() const;  // what restore() brings back: the devices as configured now
  void restore() const;  // the owner's: the file resized and made anew with the machine it knows

  std::string path_;
  int fd_;
  uid_t owner_;  // the file's; restore() is for the owner alone
  std::chrono::milliseconds lock_wait_;
  mutable std::mutex mu_;  // this process's threads (flock is per open file, shared by them)
  std::unique_ptr<layout::File> file_;     // the private copy (only the parts in use are current)
  std::unique_ptr<layout::File> machine_;  // remember_machine()'s devices and GPU count
};

}  // namespace aegis::emu
