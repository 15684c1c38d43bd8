#include "apps/aegis/sim_output.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <map>

#include "sim/csv.h"

namespace aegis::cli {

namespace {

std::string ratio(double x, double base) { return base > 0 ? fmt::format("{:.3f}", x / base) : "-"; }

const char* outcome_name(SimOutcome o) {
  switch (o) {
    case SimOutcome::Completed: return "completed";
    case SimOutcome::Oom: return "oom";
    case SimOutcome::Stopped: return "stopped";
    case SimOutcome::Preempted: return "preempted";
  }
  return "?";
}

// CSV fields from traces are quoted when they could break the row.
std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::ofstream open_out(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw InputError(path + ": cannot write file");
  return f;
}

}  // namespace

void print_table(const Trace& trace, const std::string& cluster, std::uint64_t seed, const std::vector<RunMetrics>& ms) {
  const RunMetrics* excl = nullptr;
  for (const auto& m : ms)
    if (m.policy == "exclusive") excl = &m;
  fmt::print("\n{} ({} jobs, {}, seed {})\n", trace.name, trace.jobs.size(), cluster, seed);
  fmt::print("{:<12} {:>13} {:>11} {:>7} {:>10} {:>10} {:>10} {:>11} {:>5} {:>5} {:>6} {:>7} {:>9} {:>7}\n", "policy",
             "done", "makespan_s", "/excl", "jct_mean_s", "jct_p95_s", "queue_mean", "exec_total", "oom", "nbr", "failed",
             "slow_mx", "energy_MJ", "/excl");
  for (const auto& m : ms) {
    fmt::print("{:<12} {:>13} {:>11.0f} {:>7} {:>10.0f} {:>10.0f} {:>10.0f} {:>11.0f} {:>5} {:>5} {:>6} {:>7.3f} {:>9.1f} {:>7}\n",
               m.policy, fmt::format("{}/{}", m.completed, m.jobs), m.makespan_s,
               excl ? ratio(m.makespan_s, excl->makespan_s) : "-", m.jct_mean_s, m.jct_p95_s, m.queue_mean_s,
               m.exec_total_s, m.oom_attempts, m.neighbour_oom_attempts, m.failed_attempts, m.slowdown_max, m.energy_j / 1e6,
               excl ? ratio(m.energy_j, excl->energy_j) : "-");
  }
  // A trace with users: each one's share of the charged GPU-seconds (docs/lab-policies.md).
  for (const auto& m : ms) {
    if (m.user_shares.empty()) continue;
    std::string line;
    for (const auto& [u, s] : m.user_shares) line += fmt::format(" {} {:.3f}", u, s);
    fmt::print("{:<12} user GPU shares:{}\n", m.policy, line);
  }
  // Preemption (issue 32 item 1), when on: running jobs stopped, and the work they lost.
  for (const auto& m : ms)
    if (m.lab.preemption) {
      std::string levels;  // attempts stopped, by their job's level (issue 32)
      for (const auto& [level, n] : m.lab.preempted_by_level)
        levels += fmt::format("{}level {}: {}", levels.empty() ? "" : ", ", level, n);
      fmt::print("{:<12} preemptions: {}, work lost: {:.0f} GPU-s{}\n", m.policy, m.lab.preemptions,
                 m.lab.work_lost_gpu_s, levels.empty() ? "" : " (stopped: " + levels + ")");
    }
  // Backfill (issue 32 item 5), when on: heads started after their first reserved start.
  for (const auto& m : ms)
    if (m.lab.backfill)
      fmt::print("{:<12} backfill: {} heads reserved, {} started late (mean {:.0f} s, max {:.0f} s)\n", m.policy,
                 m.lab.reserved_heads, m.lab.late_heads, m.lab.late_mean_s, m.lab.late_max_s);
}

std::vector<std::pair<std::string, double>> print_normalised(const std::vector<const Trace*>& traces,
                                                             const std::vector<std::string>& policies,
                                                             const std::vector<RunMetrics>& all) {
  std::map<std::string, std::map<std::string, double>> makespan;  // trace -> policy -> s
  for (const auto& m : all) makespan[m.trace][m.policy] = m.makespan_s;
  std::vector<std::pair<std::string, double>> out;
  for (const auto* t : traces)
    if (!makespan[t->name].count("exclusive")) return out;
  std::size_t w = 12;  // the -published policies' names are longer
  for (const auto& p : policies) w = std::max(w, p.size() + 1);
  fmt::print("\nmakespan normalised to exclusive\n{:<{}}", "policy", w);
  for (const auto* t : traces) fmt::print(" {:>14}", t->name);
  fmt::print(" {:>9}\n", traces.size() > 1 ? "geomean" : "");
  for (const auto& p : policies) {
    fmt::print("{:<{}}", p, w);
    double logsum = 0;
    for (const auto* t : traces) {
      const double r = makespan[t->name][p] / makespan[t->name]["exclusive"];
      logsum += std::log(r);
      fmt::print(" {:>14.3f}", r);
    }
    const double g = std::exp(logsum / static_cast<double>(traces.size()));
    out.push_back({p, g});
    fmt::print(" {:>9}\n", traces.size() > 1 ? fmt::format("{:.3f}", g) : "");
  }
  // Issue 31: a difference between policies is a result only beyond the spread over seeds.
  if (policies.size() > 2)
    fmt::print("(one seed: no spread, so no difference above is a result yet; --seeds N states it)\n");
  return out;
}

void write_jobs_csv(const std::string& path, const std::vector<SimResult>& runs,
                    const std::vector<std::uint64_t>& seed_of_run) {
  auto f = open_out(path);
  if (!seed_of_run.empty()) f << "seed,";
  f << "trace,policy,job_index,workload,num_gpus,submit_s,first_launch_s,end_s,completed,attempt,launch_s,"
       "first_activity_s,attempt_end_s,gpus,exclusive,floor_mib,admitted_mib,outcome,solo_runtime_s,backfilled,"
       "head_reserved_s\n";
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& r = runs[k];
    for (std::size_t slot = 0; slot < r.jobs.size(); ++slot) {
      const auto& j = r.jobs[slot];
      const Seconds reserved = slot < r.head_reserved.size() ? r.head_reserved[slot] : -1;
      for (std::size_t a = 0; a < j.attempts.size(); ++a) {
        const auto& at = j.attempts[a];
        if (!seed_of_run.empty()) f << seed_of_run[k] << ",";
        std::string gpus;
        for (int g : at.gpus) gpus += (gpus.empty() ? "" : ";") + std::to_string(g);
        f << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", field(r.trace), r.policy,
                         j.trace_index, field(j.workload), j.num_gpus, j.submit, j.first_launch, j.end,
                         j.completed ? 1 : 0, a + 1, at.launch, at.first_activity, at.end, gpus, at.exclusive ? 1 : 0,
                         at.floor_mib, at.admitted_mib, outcome_name(at.outcome), j.solo_runtime,
                         at.backfilled ? 1 : 0, reserved >= 0 ? fmt::format("{}", reserved) : "");
      }
    }
  }
}

void write_mapping_csv(const std::string& path, const std::vector<const Trace*>& traces) {
  auto f = open_out(path);
  f << "trace,job_index,source_id,submit_s,num_gpus,duration_s,gpu_fraction,workload\n";
  for (const auto* t : traces)
    for (const auto& j : t->jobs)
      f << fmt::format("{},{},{},{},{},{},{},{}\n", field(t->name), j.index, field(t->source_id(j)), j.submit_time,
                       j.num_gpus, j.duration_s ? fmt::format("{}", *j.duration_s) : "", j.gpu_fraction,
                       field(j.workload));
}

}  // namespace aegis::cli
