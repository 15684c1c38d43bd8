// Readers of the production trace formats (Philly, Alibaba 2023) and format detection.
// Used by load_trace (trace.cpp); each reader maps jobs to catalog workloads through
// workload_mapping.h and applies shape_trace.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sim/trace.h"

namespace aegis {

class CsvReader;

// The optional `priority` column of the current row (issue 32 item 1): its level, 0 when
// empty; a value outside -1000..1000 fails naming the column. The aegis and Philly readers.
std::int16_t read_priority(const CsvReader& r);

// The format whose required columns the header has; empty if none or more than one match.
std::optional<TraceFormat> detect_trace_format(const std::vector<std::string>& header);

Trace load_philly_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& options);
Trace load_alibaba_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& options);

}  // namespace aegis
