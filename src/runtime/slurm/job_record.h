// What aegis needs to know of a Slurm job, read from `scontrol show job -o ID` (one line
// of Key=Value fields). Pure parsing; commands.h runs scontrol.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace aegis::slurm {

struct JobRecord {
  std::string id;
  std::optional<uid_t> uid;          // UserId=ann(1000)
  std::string state;                 // JobState: RUNNING, PENDING, ...
  std::string partition;             // may be a comma list
  std::string nodes;                 // NodeList (a hostlist expression)
  std::string excluded_nodes;        // ExcNodeList, "" for none
  std::string tres_per_node;         // TresPerNode, "" for none: "gres:aegis_mem:12G"
  bool requeue_allowed = false;      // Requeue=1
  int restarts = 0;                  // Restarts
  std::map<std::string, std::string> fields;  // everything, as read
};

// Reads one `scontrol show job -o` line. Values may hold spaces (Comment, Command): a
// word that does not start a new Key= belongs to the value before it. Empty when the
// line has no JobId.
std::optional<JobRecord> parse_job_record(std::string_view line);

}  // namespace aegis::slurm
