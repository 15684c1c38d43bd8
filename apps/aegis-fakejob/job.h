// One emulated training job's life on the emulated GPUs: startup, memory ramp, progress at
// the speed the simulator's interference model gives against its co-runners, the end.
#pragma once
#include <csignal>
#include <vector>

#include "options.h"
#include "runtime/gpu/emulated/state.h"

namespace aegis::fakejob {

// Runs the job as process `pid` on `gpus` (indices). Returns its exit status: 0 done,
// 1 out of memory (the PyTorch message is on stderr), 128 + the signal once `stop` is
// set. Leaves what it holds to the caller to release, whatever the outcome.
int run_job(emu::State& state, const Options& o, const std::vector<int>& gpus, std::uint32_t pid,
            const volatile std::sig_atomic_t& stop);

}  // namespace aegis::fakejob
