#include "sim/json_report.h"

#include <map>
#include <string_view>

namespace aegis {

Json value_to_json(const ParamValue& v) {
  return std::visit([](const auto& x) { return Json(x); }, v);
}

namespace {

// Issue 32's lab-scheduling parameters (docs/lab-policies.md) are recorded only when set off
// their defaults, which are the published loop: records of runs that use none stay byte for
// byte what they were (tests/sim_golden.py). Each item adds its parameters here.
bool omitted_at_default(const ParamInfo& p) {
  static const std::map<std::string_view, ParamValue> kLab = {
      {"array_probe_settle_s", ParamValue(60.0)}, {"array_probe", ParamValue(true)},  // items 3, 4
      {"array_floor_pass_over", ParamValue(true)},  // item 3
      {"backfill", ParamValue(false)}, {"time_limit_factor", ParamValue(0.0)},  // item 5
      {"backfill_history_runs", ParamValue(std::int64_t{0})}, {"backfill_history_quantile", ParamValue(0.9)},
      {"backfill_joins", ParamValue(std::string("by_reservation"))},  // item 5
      {"backfill_join_slowdown", ParamValue(1.28)},  // item 5
      {"fair_share_charge", ParamValue(std::string("occupied"))},  // item 2
      {"fair_share_committed", ParamValue(std::string("mean_run_time"))},  // item 2
      {"preemption", ParamValue(false)}, {"checkpoint_lead_s", ParamValue(120.0)},  // item 1
      {"checkpoint_save_s", ParamValue(30.0)}, {"checkpoint_interval_s", ParamValue(0.0)},
      {"preempt_exempt_s", ParamValue(600.0)}, {"preempt_exempt_growth", ParamValue(1.0)},  // item 1
  };
  const auto it = kLab.find(p.name);
  return it != kLab.end() && it->second == p.value;
}

}  // namespace

Json to_json(const std::vector<ParamInfo>& params) {
  Json j = Json::object();
  for (const auto& p : params)
    if (!omitted_at_default(p)) j[std::string(p.name)] = value_to_json(p.value);
  return j;
}

Json to_json(const RunMetrics& m) {
  Json j;
  j["policy"] = m.policy;
  j["trace"] = m.trace;
  j["jobs"] = m.jobs;
  j["completed"] = m.completed;
  j["stopped"] = m.stopped;
  j["makespan_s"] = m.makespan_s;
  j["jct_mean_s"] = m.jct_mean_s;
  j["jct_p50_s"] = m.jct_p50_s;
  j["jct_p95_s"] = m.jct_p95_s;
  j["queue_mean_s"] = m.queue_mean_s;
  j["queue_p95_s"] = m.queue_p95_s;
  j["exec_total_s"] = m.exec_total_s;
  j["attempts"] = m.attempts;
  j["failed_attempts"] = m.failed_attempts;
  j["oom_attempts"] = m.oom_attempts;
  j["neighbour_oom_attempts"] = m.neighbour_oom_attempts;
  j["mps_limit_attempts"] = m.mps_limit_attempts;
  j["collocated_attempts"] = m.collocated_attempts;
  j["slowdown_mean"] = m.slowdown_mean;
  j["slowdown_max"] = m.slowdown_max;
  j["energy_j"] = m.energy_j;
  j["gpu_mem_util_mean"] = m.gpu_mem_util_mean;
  j["sm_util_mean"] = m.sm_util_mean;
  if (!m.user_shares.empty()) {  // a trace with users only: runs without keep their bytes
    j["user_shares"] = Json::object();
    for (const auto& [u, s] : m.user_shares) j["user_shares"][u] = s;
  }
  if (m.lab.preemption) {  // sim.preemption on only: runs without keep their bytes
    j["preemptions"] = m.lab.preemptions;
    j["work_lost_gpu_s"] = m.lab.work_lost_gpu_s;
    j["preempted_by_level"] = Json::object();  // attempts stopped, by their job's level
    for (const auto& [level, n] : m.lab.preempted_by_level) j["preempted_by_level"][std::to_string(level)] = n;
  }
  if (m.lab.backfill) {  // backfill on only (issue 32 item 5): runs without keep their bytes
    j["reserved_heads"] = m.lab.reserved_heads;
    j["late_heads"] = m.lab.late_heads;
    j["late_mean_s"] = m.lab.late_mean_s;
    j["late_max_s"] = m.lab.late_max_s;
  }
  return j;
}

}  // namespace aegis
