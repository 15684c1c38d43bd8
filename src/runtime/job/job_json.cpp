#include "runtime/job/job_json.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <stdexcept>

namespace aegis {

namespace {

using nlohmann::json;

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
json opt(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> opt_double(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<double>();
}

json attempt_json(const Attempt& a) {
  return {{"number", a.number},          {"gpus", a.gpu_uuids},
          {"launched_at", a.launched_at}, {"first_activity", opt(a.first_activity)},
          {"anchor", a.anchor},           {"context_at", opt(a.context_at)},
          {"exclusive", a.exclusive},     {"admitted_mib", a.admitted_mib},
          {"free_at_placement_mib", a.free_at_placement},
          {"gpu_total_mib", a.gpu_total_mib},
          {"pgid", a.pgid},               {"shim_pid", a.shim_pid},
          {"peak_mib", a.peak_mib},
          {"ended_at", opt(a.ended_at)},
          {"outcome", std::string(to_string(a.outcome))}, {"detail", a.detail},
          {"exit_code", opt(a.exit_code)}, {"signal", opt(a.signal)}};
}

// Schema 1 said how an attempt ended in the classifier's words only (classify.cpp):
// "exit status N" and "killed by signal N (...)" give the fields back; a start that
// failed ("failed to start: ...") was recorded as 'failed'.
void derive_exit_fields(Attempt& a) {
  if (a.outcome == AttemptOutcome::Failed && a.detail.rfind("failed to start: ", 0) == 0)
    a.outcome = AttemptOutcome::FailedStart;
  if (a.outcome != AttemptOutcome::Completed && a.outcome != AttemptOutcome::Failed) return;
  int n = -1, used = 0;
  if (std::sscanf(a.detail.c_str(), "exit status %d%n", &n, &used) == 1 &&
      static_cast<std::size_t>(used) == a.detail.size() && n >= 0 && n <= 255) {
    a.exit_code = n;
  } else if (std::sscanf(a.detail.c_str(), "killed by signal %d%n", &n, &used) == 1 && n >= 1 && n <= 127 &&
             (static_cast<std::size_t>(used) == a.detail.size() || a.detail[static_cast<std::size_t>(used)] == ' ')) {
    a.signal = n;
  }
}

Attempt attempt_from(const json& j) {
  Attempt a;
  a.number = j.at("number").get<int>();
  a.gpu_uuids = j.at("gpus").get<std::vector<std::string>>();
  a.launched_at = j.at("launched_at").get<double>();
  a.first_activity = opt_double(j, "first_activity");
  a.anchor = j.value("anchor", std::string());
  a.context_at = opt_double(j, "context_at");
  a.exclusive = j.at("exclusive").get<bool>();
  a.admitted_mib = j.at("admitted_mib").get<MiB>();
  a.free_at_placement = j.at("free_at_placement_mib").get<MiB>();
  a.gpu_total_mib = j.at("gpu_total_mib").get<MiB>();
  a.pgid = j.at("pgid").get<pid_t>();
  a.shim_pid = j.value("shim_pid", 0);
  a.peak_mib = j.value("peak_mib", MiB{0});
  a.ended_at = opt_double(j, "ended_at");
  const auto outcome = parse_attempt_outcome(j.at("outcome").get<std::string>());
  if (!outcome) throw std::runtime_error("attempt outcome: unknown");
  a.outcome = *outcome;
  a.detail = j.at("detail").get<std::string>();
  derive_exit_fields(a);
  return a;
}

}  // namespace

namespace {

json job_json(const DaemonJob& job, json request);

// Cuts every string under `v` longer than max_bytes; `path` names `v` in `cut` (once).
void cut_strings(json& v, std::size_t max_bytes, const std::string& path, std::vector<std::string>& cut) {
  if (v.is_string()) {
    auto& s = v.get_ref<std::string&>();
    if (s.size() <= max_bytes) return;
    s = api::cut_string(s, max_bytes);
    if (std::find(cut.begin(), cut.end(), path) == cut.end()) cut.push_back(path);
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      cut_strings(it.value(), max_bytes, path.empty() ? it.key() : path == "request" ? "request." + it.key() : path, cut);
  } else if (v.is_array()) {
    for (auto& e : v) cut_strings(e, max_bytes, path, cut);
  }
}

}  // namespace

json to_json(const DaemonJob& job) { return job_json(job, json::parse(api::to_json(job.request))); }

json to_listing_json(const DaemonJob& job, std::size_t max_bytes) {
  std::vector<std::string> cut;
  json v = job_json(job, json::parse(api::to_listing_json(job.request, max_bytes, cut)));
  cut_strings(v, max_bytes, "", cut);
  if (!cut.empty()) v["cut"] = cut;
  return v;
}

namespace {

json job_json(const DaemonJob& job, json request) {
  json attempts = json::array();
  for (const auto& a : job.attempts) attempts.push_back(attempt_json(a));
  const Attempt* cur = job.current();
  json j = {{"id", job.id},
            {"name", job.request.name},
            {"user", job.user},
            {"uid", job.uid},
            {"gid", job.gid},
            {"state", std::string(to_string(job.state))},
            {"gpus", job.request.gpus},
            {"gpu_uuids", cur && job.state == JobState::Running ? json(cur->gpu_uuids) : json::array()},
            {"attempts", static_cast<int>(job.attempts.size())},
            {"submitted_at", job.submitted_at},
            {"started_at", opt(job.started_at)},
            {"ended_at", opt(job.ended_at)},
            {"reason", job.reason},
            {"queue", job.state == JobState::Queued ? (job.in_recovery_queue ? "recovery" : "main") : ""},
            {"queue_seq", job.queue_seq},
            {"cancel_requested", job.cancel_requested},
            {"recovery", {{"floor_mib", job.recovery.floor_mib},
                          {"exclusive_only", job.recovery.exclusive_only},
                          {"oom_count", job.recovery.oom_count}}},
            {"request", std::move(request)},
            {"attempt_log", attempts},
            {"attached_to", job.attached_to ? json{{"pid", job.attached_to->pid}, {"start_ticks", job.attached_to->start_ticks}}
                                            : json(nullptr)},
            // How the last attempt's process ended (null while it runs, or when it was
            // not an exit or not a signal): what `aegis run` ends with.
            {"exit_code", cur ? opt(cur->exit_code) : json(nullptr)},
            {"signal", cur ? opt(cur->signal) : json(nullptr)}};
  // Issue 32: its array and dependencies, when it has them.
  if (job.array_id) {
    j["array_id"] = *job.array_id;
    j["array_index"] = job.array_index;
    if (job.array_limit > 0) j["array_limit"] = job.array_limit;
  }
  if (!job.after.empty()) {
    json after = json::array();
    for (const auto& [id, kind] : job.after) after.push_back(std::to_string(id) + ":" + kind);
    j["after"] = std::move(after);
  }
  return j;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The schema-1 reader: the store kept this JSON view as each job's record until schema 2
// (store/schema.h). Used by the store's migration only; the API never reads it back.

DaemonJob job_from_json(const json& j) {
  try {
    DaemonJob d;
    d.id = j.at("id").get<JobId>();
    d.user = j.at("user").get<std::string>();
    d.uid = j.at("uid").get<uid_t>();
    d.gid = j.at("gid").get<gid_t>();
    auto st = parse_job_state(j.at("state").get<std::string>());
    if (!st) throw std::runtime_error("state: unknown");
    d.state = *st;
    d.in_recovery_queue = j.at("queue").get<std::string>() == "recovery";
    d.queue_seq = j.at("queue_seq").get<std::int64_t>();
    d.submitted_at = j.at("submitted_at").get<double>();
    d.started_at = opt_double(j, "started_at");
    d.ended_at = opt_double(j, "ended_at");
    d.reason = j.at("reason").get<std::string>();
    d.cancel_requested = j.at("cancel_requested").get<bool>();
    const auto& r = j.at("recovery");
    d.recovery.floor_mib = r.at("floor_mib").get<MiB>();
    d.recovery.exclusive_only = r.at("exclusive_only").get<bool>();
    d.recovery.oom_count = r.at("oom_count").get<int>();
    auto req = api::parse_request("{\"op\":\"submit\",\"job\":" + j.at("request").dump() + "}");
    if (auto* e = std::get_if<api::ParseError>(&req)) throw std::runtime_error("request: " + e->message);
    d.request = std::get<api::SubmitRequest>(std::get<api::Request>(req)).job;
    for (const auto& a : j.at("attempt_log")) d.attempts.push_back(attempt_from(a));
    if (j.contains("attached_to") && !j["attached_to"].is_null())
      d.attached_to = ClientProcess{j["attached_to"].at("pid").get<pid_t>(),
                                    j["attached_to"].at("start_ticks").get<std::uint64_t>()};
    return d;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("job record: ") + e.what());
  }
}

std::optional<DaemonJob> parse_job_record(std::string_view text, std::string& error) {
  try {
    const json j = json::parse(text.begin(), text.end());
    if (!j.is_object()) {
      error = "job record: not a JSON object";
      return std::nullopt;
    }
    return job_from_json(j);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    error = e.what();
  }
  // One line, of bounded length: it goes into logs and error replies.
  for (auto& c : error)
    if (c == '\n' || c == '\r') c = ' ';
  if (error.size() > 300) error = error.substr(0, 300) + "...";
  if (error.rfind("job record: ", 0) != 0) error = "job record: " + error;
  return std::nullopt;
}

}  // namespace aegis
