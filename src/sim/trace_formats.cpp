#include "sim/trace_formats.h"

#include "sim/csv.h"

namespace aegis {

// Placeholder until the production readers land.
std::optional<TraceFormat> detect_trace_format(const std::vector<std::string>& header) {
  for (const auto& h : header)
    if (h == "workload_name") return TraceFormat::Aegis;
  return std::nullopt;
}

Trace load_philly_trace(const std::string& path, const WorkloadCatalog&, const TraceOptions&) {
  throw InputError(path + ": the philly format is not supported yet");
}

Trace load_alibaba_trace(const std::string& path, const WorkloadCatalog&, const TraceOptions&) {
  throw InputError(path + ": the alibaba format is not supported yet");
}

}  // namespace aegis
