// JSON form of daemon jobs: the API's view of a job (docs/api.md: queue, show, history).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/job/job.h"

namespace aegis {

nlohmann::json to_json(const DaemonJob& job);
// Issue 33 item 1: the job as listings show it: its request as api::to_listing_json gives it
// (no environment, long argv and workdir cut), every other string past `max_bytes` cut too,
// and `cut`: the fields cut ("request.command", "reason", "attempt_log"), when any was.
nlohmann::json to_listing_json(const DaemonJob& job, std::size_t max_bytes);

// The reader of that view, for the store's migration from schema 1 only (store/schema.h),
// whose records were this JSON: the store keeps typed columns now, and nothing else reads
// a job back from JSON. It also gives attempts the exit_code, signal and 'failed-start'
// outcome that schema 1 wrote only in words.
// Throws std::runtime_error naming the field for a record it cannot read.
DaemonJob job_from_json(const nlohmann::json& j);
// A schema-1 record (its JSON text). Throws nothing but std::bad_alloc: a record it
// cannot read gives nullopt and `error`, one line naming what is wrong.
std::optional<DaemonJob> parse_job_record(std::string_view text, std::string& error);

}  // namespace aegis
