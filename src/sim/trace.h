// A job trace: when each job arrives, which workload it runs, on how many GPUs.
// Format of the published evaluation traces (data/aegis/trace_*.csv):
//   job_index, submit_time_s, workload_name, num_gpus
#pragma once
#include <string>
#include <vector>

#include "core/units.h"
#include "sim/workload.h"

namespace aegis {

struct TraceJob {
  std::int64_t index = 0;
  Seconds submit_time = 0;
  std::string workload;
  int num_gpus = 1;
  std::string where;  // "file:line", for error messages
};

struct Trace {
  std::string name;  // file stem, e.g. "trace_philly"
  std::string path;
  std::vector<TraceJob> jobs;  // sorted by submit time, then index
};

// Loads and validates an AEGIS-format trace against the catalog: every workload must
// exist and be fully profiled, GPU counts must match. Throws InputError naming file,
// line and field.
Trace load_aegis_trace(const std::string& path, const WorkloadCatalog& catalog);

}  // namespace aegis
