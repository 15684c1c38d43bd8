// `aegis run`: submit a job to this node's aegisd and wait for it like a local process
// (its output on ours, its exit status as ours, SIGTERM cancels it), for batch scripts
// and Slurm; and `aegis submit --slurm`, which hands such a script to sbatch.
#pragma once
#include <string>
#include <vector>

#include "runtime/api/request.h"

namespace aegis::cli {

struct RunArgs {
  double requeue_after_s = 600;  // under Slurm: give a job stuck waiting to run alone back to Slurm
};

struct SlurmArgs {
  bool enabled = false;
  std::string gres = "aegis_mem";  // count-only GRES worth the node's GPU memory in GiB
  std::vector<std::string> args;   // extra sbatch options
};

// Returns the exit status to end with: the job's own on completion or failure, 143 when
// cancelled, 75 (EX_TEMPFAIL) when given back to Slurm.
int run_and_wait(const api::JobRequest& job, const RunArgs& args, const std::string& socket);

// Writes the sbatch script (in the working directory's .aegis/) and submits it; returns
// Slurm's job id. Throws ClientError with sbatch's message when it refuses.
std::string submit_to_slurm(const api::JobRequest& job, const SlurmArgs& args);

// The sbatch script for `job` (exposed for tests).
std::string sbatch_script(const api::JobRequest& job, const SlurmArgs& args);

}  // namespace aegis::cli
