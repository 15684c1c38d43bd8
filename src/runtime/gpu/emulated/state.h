// The emulated GPUs' shared state: a file mapped by every process that plays a part (the
// emulated NVML library, fake jobs, tests), holding the GPUs and a process table under a
// robust process-shared mutex. Processes that no longer exist are dropped when read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "core/units.h"
#include "runtime/gpu/emulated/gpu_spec.h"

namespace aegis::emu {

inline constexpr int kMaxProcesses = 1024;

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
  MiB used_mib = 0;         // sum of its processes' memory
  Activity activity;        // speed-weighted sum of its active processes, each capped at 1
  double power_w = 0;
  double energy_j = 0;      // since the state file was created
  Activity integral;        // activity-seconds since creation (GPM: mean between readings)
  double time_s = 0;        // seconds since creation, the instant of this reading
  int process_count = 0;
};

// Left uninitialised by default: callers keep large buffers of these on the stack.
struct ProcessEntry {
  std::uint32_t pid;
  MiB used_mib;
};

// Sums over the other active processes of one GPU, as the interference model takes them.
struct CoRunners {
  double util = 0, drama = 0;
};

namespace layout {
struct File;
}

class State {
 public:
  // Maps `path`, creating and sizing it if missing. With `gpus` non-empty, (re)configures
  // the GPU table to them (processes on GPUs that vanish are dropped). Returns null and
  // sets `error` to one line when the file cannot be used.
  static std::unique_ptr<State> open(const std::string& path, std::span<const GpuSpec> gpus, std::string* error);
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  int gpu_count() const;
  std::string gpu_name(int gpu) const;  // "" for a GPU that does not exist
  const std::string& path() const { return path_; }

  // Adds `mib` to what `pid` holds on `gpu`; false (and nothing held) when the GPU's used
  // memory plus `mib` would exceed its total: the emulated out-of-memory. `free_mib`, when
  // given, receives the GPU's free memory at the decision.
  bool allocate(int gpu, std::uint32_t pid, MiB mib, MiB* free_mib = nullptr);
  // Sets the solo activity of `pid` on `gpu` (registering it there) and its current speed
  // (the weight of its activity in the GPU's totals); false for a bad GPU or a full table.
  bool set_activity(int gpu, std::uint32_t pid, const Activity& solo, double speed = 1.0);
  // Drops every entry of `pid`.
  void release(std::uint32_t pid);
  CoRunners co_runners(int gpu, std::uint32_t pid);

  // Totals of one GPU now (zeros for a GPU that does not exist).
  GpuReading read(int gpu);
  // The processes on `gpu`: fills up to `out.size()` entries, returns how many there are.
  std::size_t processes(int gpu, std::span<ProcessEntry> out);

 private:
  State(std::string path, layout::File* file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  layout::File* file_;
};

}  // namespace aegis::emu
