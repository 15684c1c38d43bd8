// Giving a job back to Slurm: after OOMs a job may only run alone on a GPU; when the node
// it was given cannot offer one soon, Slurm requeues it with a whole GPU's memory booked,
// away from the nodes it already waited on, marked so that it runs alone wherever it
// lands (docs/slurm.md). The plan is pure; job_runner carries it out with commands.h.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "runtime/slurm/job_record.h"

namespace aegis::slurm {

// In a job's comment: it must run alone (set by a give-back, read by the next `aegis run`).
inline constexpr std::string_view kAloneMarker = "aegis:alone";
bool marked_alone(std::string_view comment);

struct GiveBackInput {
  JobRecord job;
  std::string comment;                       // the job's comment as it is
  std::string this_node;                     // where it waited
  std::vector<std::string> excluded;         // nodes already excluded (expanded)
  std::vector<std::string> partition_nodes;  // every node of its partitions
  MiB whole_gpu_mib = 0;                     // memory of the largest GPU here
  int gpus = 1;
  int oom_count = 0;
  std::string gres_name = "aegis_mem";
};

struct GiveBackPlan {
  bool go = false;
  std::string why_not;   // when !go: one line
  std::string comment;   // the comment to set before the requeue
  std::string gres;      // Gres= after the requeue
  std::string exclude;   // ExcNodeList= after the requeue
};

GiveBackPlan plan_give_back(const GiveBackInput& in);

}  // namespace aegis::slurm
