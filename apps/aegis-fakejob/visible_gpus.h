// Which emulated devices a job may use, from CUDA_VISIBLE_DEVICES as CUDA reads it: a
// comma-separated list of GPU indices, GPU UUIDs or MIG UUIDs; unset means GPU 0 (where a
// one-GPU PyTorch job runs when nothing narrows it). As in CUDA, a GPU in MIG mode is no
// device itself: naming it gives its first MIG instance; and a process sees at most one
// MIG instance, the first one listed.
#pragma once
#include <string>
#include <vector>

#include "runtime/gpu/emulated/state.h"

namespace aegis::fakejob {

// The device ids (device_ids.h), in the job's device order; empty with `error` set when
// the list is empty or names a device that does not exist (CUDA would fail the first call).
std::vector<int> visible_gpus(const char* cuda_visible_devices, const emu::State& state, std::string* error);

}  // namespace aegis::fakejob
