// `aegis run`: submit a job to this node's aegisd and wait for it like a local process
// (its output on ours, its exit status as ours; the job is cancelled when we are
// signalled or killed), for batch scripts and Slurm; and `aegis submit --slurm`, which
// hands such a script to sbatch. Under Slurm, GPU memory is booked as a count-only GRES
// in bytes (docs/slurm.md).
#pragma once
#include <string>
#include <vector>

#include "runtime/api/request.h"

namespace aegis::cli {

struct RunArgs {
  double requeue_after_s = 600;  // under Slurm: a job waiting this long to run alone after OOMs goes back to Slurm
  double daemon_wait_s = 300;    // how long to keep trying an aegisd that went away (a restart)
  bool mem_from_slurm = true;    // under Slurm, no --mem: the job's GPU-memory booking is its declared memory
  std::string gres = "aegis_mem";
};

struct SlurmArgs {
  bool enabled = false;
  std::string gres = "aegis_mem";  // count-only GRES counted in bytes, worth the node's GPU memory
  std::vector<std::string> args;   // extra sbatch options
  std::string aegis_binary;        // what the script runs on the node; default: this binary's path
  std::string spec, model_spec;    // absolute paths of the submit's --spec and --model-spec, if given
};

// Returns the exit status to end with: the job's own on completion or failure, 143 when
// cancelled, 75 (EX_TEMPFAIL) when given back to Slurm. `timeout_s` bounds each request
// to aegisd; one that times out is retried like an unreachable daemon (args.daemon_wait_s).
int run_and_wait(api::JobRequest job, const RunArgs& args, const std::string& socket, double timeout_s);

// Writes the sbatch script (in the working directory's .aegis/) and submits it; returns
// Slurm's job id. Throws ClientError with sbatch's message when it refuses.
std::string submit_to_slurm(const api::JobRequest& job, const SlurmArgs& args);

// The sbatch script for `job` (exposed for tests). `default_mib` is booked per GPU when
// the job declares no memory.
std::string sbatch_script(const api::JobRequest& job, const SlurmArgs& args, MiB default_mib);

}  // namespace aegis::cli
