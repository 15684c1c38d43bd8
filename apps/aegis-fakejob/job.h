// One emulated training job's life on the emulated GPUs: startup, the MPS connection when
// it is an MPS client, memory ramp, progress at the speed the emulated GPU's contention
// model gives against its co-runners (runtime/gpu/emulated/contention.h), the end.
#pragma once
#include <csignal>
#include <optional>
#include <vector>

#include "mps_client.h"
#include "options.h"
#include "runtime/gpu/emulated/contention.h"
#include "runtime/gpu/emulated/state.h"

namespace aegis::fakejob {

// One device the job runs on, as CUDA shows it to the job.
struct JobDevice {
  int id = 0;                    // in the shared state: a GPU or a MIG instance (device_ids.h)
  double sm_fraction = 1;        // a MIG instance's share of its GPU's SMs
  std::optional<MiB> mps_limit;  // CUDA_MPS_PINNED_DEVICE_MEM_LIMIT on it
};

// Runs the job as process `pid` on `devices` (in device ordinal order). Returns its exit
// status: 0 done, 1 a CUDA error (out of memory, or no MPS control daemon to connect to;
// the message is on stderr), 128 + the signal once `stop` is set. Leaves what it holds to
// the caller to release, whatever the outcome.
int run_job(emu::State& state, const Options& o, const std::vector<JobDevice>& devices, const MpsSettings& mps,
            const emu::ContentionConfig& contention, std::uint32_t pid, const volatile std::sig_atomic_t& stop);

}  // namespace aegis::fakejob
