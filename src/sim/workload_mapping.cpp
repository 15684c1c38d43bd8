#include "sim/workload_mapping.h"

#include "sim/csv.h"

namespace aegis {

// Placeholder until the mapping lands.
std::string map_workloads(std::vector<TraceJob>&, const WorkloadCatalog&, std::uint64_t, bool) {
  throw InputError("workload mapping is not implemented yet");
}

}  // namespace aegis
