// Which emulated GPUs a job may use, from CUDA_VISIBLE_DEVICES as CUDA reads it: a
// comma-separated list of GPU UUIDs or indices; unset means GPU 0 (where a one-GPU
// PyTorch job runs when nothing narrows it).
#pragma once
#include <string>
#include <vector>

namespace aegis::fakejob {

// The GPU indices, in the job's device order; empty with `error` set when the list is
// empty or names a GPU that does not exist (CUDA would fail the first call).
std::vector<int> visible_gpus(const char* cuda_visible_devices, int gpu_count, std::string* error);

}  // namespace aegis::fakejob
