// JSON records of runs: the metrics of each run and the full config it used, so that a
// result file says exactly how it was produced.
#pragma once
#include <nlohmann/json.hpp>

#include "core/param_table.h"
#include "sim/metrics.h"

namespace aegis {

using Json = nlohmann::ordered_json;

Json to_json(const RunMetrics& m);
Json to_json(const std::vector<ParamInfo>& params);  // {"name": value, ...}
Json value_to_json(const ParamValue& v);

}  // namespace aegis
