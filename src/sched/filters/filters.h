// Factories for the engine's filters; each lives in its own file in this folder and is
// composed through the registry (sched/stage_registry.cpp), which says when and in which
// place. A factory reads its settings from the config.
#pragma once
#include <memory>

#include "sched/stage.h"

namespace aegis {

// No job joins a GPU that holds a job placed to run alone.
std::unique_ptr<Filter> make_exclusive_guard(const EngineConfig& c);
// A job on several GPUs never gets a MIG instance: CUDA would show it only the first.
std::unique_ptr<Filter> make_mig_single_gpu(const EngineConfig& c);
// Stage 1: effective free memory (see memory_accounting.h) covers the requirement.
std::unique_ptr<Filter> make_memory_fit(const EngineConfig& c);
// Stage 2: a GPU that just received a job is closed until that job has been active
// for the observation window.
std::unique_ptr<Filter> make_observation_gate(const EngineConfig& c);
// Stage 3: telemetry risk scores say the GPU is not already busy.
std::unique_ptr<Filter> make_pressure_filter(const EngineConfig& c);
// At most max_jobs_per_gpu jobs on a GPU.
std::unique_ptr<Filter> make_job_count_cap(const EngineConfig& c);
// Horus: profiled utilisation of the GPU's jobs plus the new one stays within util_cap.
std::unique_ptr<Filter> make_util_cap(const EngineConfig& c);
// Lucid: sharing scores of the GPU's jobs plus the new one stay within sharing_score_cap.
std::unique_ptr<Filter> make_sharing_score_cap(const EngineConfig& c);
// Under MPS: a GPU's jobs all belong to one user (mps_one_user_per_gpu).
std::unique_ptr<Filter> make_mps_one_user(const EngineConfig& c);
// Lucid: only jobs with equal GPU counts share.
std::unique_ptr<Filter> make_same_gpu_count(const EngineConfig& c);

}  // namespace aegis
