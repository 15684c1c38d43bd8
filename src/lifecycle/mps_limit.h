// The MPS client memory limit a job starts with (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT on each
// of its devices), from what is known of the job and never from the estimator-free floor,
// which says what a GPU must offer, not what a job needs. Both drivers get it through the
// lifecycle's starts (docs/sharing.md, "MPS memory limits").
#pragma once
#include <optional>

#include "core/job.h"
#include "lifecycle/placer.h"
#include "sched/config.h"

namespace aegis {

// The limit: nothing for a job placed exclusive (nobody may join it). Otherwise, in this order:
//  1. the policy's estimate for the job: its admitted memory (estimate, or the ladder's
//     floor when higher) plus the margin, as booked;
//  2. else the job's own figures, its declared memory or its recorded peak (history),
//     the larger, and not below a ladder floor, plus the margin;
//  3. else nothing is known: the free memory of its GPUs at placement (at least what it
//     was admitted with). A job needing more could not have run there anyway, so the
//     limit kills no job that would have lived; the floor (5,120 MiB) would kill every
//     job larger than it by design.
// Under MPS (EngineConfig::mps) a job on several GPUs runs exclusive, with no MPS: aegisd
// runs one control daemon per GPU (CUDA_VISIBLE_DEVICES = that GPU), and a client reaches
// one control daemon, so it would see one of its GPUs (docs/sharing.md).
inline bool runs_alone_under_mps(const EngineConfig& config, const JobSpec& spec) {
  return config.mps && spec.num_gpus > 1;
}

std::optional<MiB> mps_memory_limit(const EngineConfig& config, const QueuedJob& job, const Placement& placement);

}  // namespace aegis
