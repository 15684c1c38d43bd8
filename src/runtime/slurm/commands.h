// The Slurm commands aegis runs on a node or a login node (scontrol, squeue, sinfo,
// sbatch), started directly (no shell) with their output captured.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/slurm/job_record.h"

namespace aegis::slurm {

struct CommandResult {
  int status = -1;      // exit status; -1 when it could not run or was killed
  std::string output;   // stdout and stderr together
  bool ok() const { return status == 0; }
  std::string first_line() const;
};

CommandResult run_command(const std::vector<std::string>& argv);

// `scontrol show job -o ID`; empty with *error set when Slurm does not answer.
std::optional<JobRecord> show_job(const std::string& id, std::string* error);
// The job's comment as written (`squeue -o %k`), "" for none.
std::string job_comment(const std::string& id);
// `scontrol show hostnames EXPR`: "n[1-3]" -> n1, n2, n3.
std::vector<std::string> expand_hostlist(const std::string& expr);
// The nodes of the partitions (a comma list), each once.
std::vector<std::string> partition_nodes(const std::string& partitions);
// `scontrol update JobId=ID KEY=VALUE...`.
CommandResult update_job(const std::string& id, const std::vector<std::string>& assignments);
CommandResult requeue_job(const std::string& id);

}  // namespace aegis::slurm
