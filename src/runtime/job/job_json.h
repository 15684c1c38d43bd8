// JSON form of daemon jobs: what the store keeps and what the API returns.
#pragma once
#include <nlohmann/json.hpp>

#include "runtime/job/job.h"

namespace aegis {

nlohmann::json to_json(const DaemonJob& job);
// Throws std::runtime_error naming the field for a record it cannot read.
DaemonJob job_from_json(const nlohmann::json& j);

}  // namespace aegis
