// Readers of the production trace formats (Philly, Alibaba 2023) and format detection.
// Used by load_trace (trace.cpp); each reader maps jobs to catalog workloads through
// workload_mapping.h and applies shape_trace.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.h"

namespace aegis {

class CsvReader;

// The optional `priority` column of the current row (issue 32 item 1): its level, 0 when
// empty; a value outside -1000..1000 fails naming the column. The aegis and Philly readers.
std::int16_t read_priority(const CsvReader& r);

// The format whose required columns the header has; empty if none or more than one match.
std::optional<TraceFormat> detect_trace_format(const std::vector<std::string>& header);

// With --alibaba-qos-priority, the level of a pod's `qos` class (Kubernetes QoS as Alibaba
// names it): LS (latency sensitive) and Guaranteed 2, Burstable 1, BE (best effort) 0.
// Empty for any other text: the reader refuses the row.
std::optional<std::int16_t> alibaba_qos_level(std::string_view qos);

Trace load_philly_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& options);
Trace load_alibaba_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& options);

}  // namespace aegis
