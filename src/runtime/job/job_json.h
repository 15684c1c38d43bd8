// JSON form of daemon jobs: what the store keeps and what the API returns.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/job/job.h"

namespace aegis {

nlohmann::json to_json(const DaemonJob& job);
// Throws std::runtime_error naming the field for a record it cannot read.
DaemonJob job_from_json(const nlohmann::json& j);
// A stored record (the JSON text the store keeps). Throws nothing but std::bad_alloc: a
// record it cannot read gives nullopt and `error`, one line naming what is wrong.
std::optional<DaemonJob> parse_job_record(std::string_view text, std::string& error);

}  // namespace aegis
