// Factories for the engine's filters; each lives in its own file in this folder.
#pragma once
#include <memory>

#include "sched/stage.h"

namespace aegis {

// No job joins a GPU that holds a job placed to run alone.
std::unique_ptr<Filter> make_exclusive_guard();
// A job on several GPUs never gets a MIG instance: CUDA would show it only the first.
std::unique_ptr<Filter> make_mig_single_gpu();
// Stage 1: effective free memory (see memory_accounting.h) covers the requirement.
std::unique_ptr<Filter> make_memory_fit();
// Stage 2: a GPU that just received a job is closed until that job has been active
// for the observation window.
std::unique_ptr<Filter> make_observation_gate();
// Stage 3: telemetry risk scores say the GPU is not already busy.
std::unique_ptr<Filter> make_pressure_filter(const EngineConfig& c);
// At most this many jobs on a GPU.
std::unique_ptr<Filter> make_job_count_cap(int max_jobs);
// Horus: profiled utilisation of the GPU's jobs plus the new one stays within the cap.
std::unique_ptr<Filter> make_util_cap(double cap);
// Lucid: sharing scores of the GPU's jobs plus the new one stay within the cap.
std::unique_ptr<Filter> make_sharing_score_cap(int cap);
// Lucid: only jobs with equal GPU counts share.
std::unique_ptr<Filter> make_same_gpu_count();

}  // namespace aegis
