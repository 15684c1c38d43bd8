// `aegis sim`: replays traces through the engine under several policies and prints a
// comparison table; `--json` records every figure and the full config of every run.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <thread>
#include <atomic>

#include "apps/aegis/commands.h"
#include "sched/config_params.h"
#include "sched/engine.h"
#include "sched/policies.h"
#include "sim/csv.h"
#include "sim/json_report.h"
#include "sim/metrics.h"
#include "sim/report_html.h"
#include "sim/simulator.h"

namespace aegis::cli {

namespace {

struct SimArgs {
  std::string workloads = "data/aegis/workloads.csv";
  std::vector<std::string> traces;
  int gpus = 3;
  MiB gpu_memory = 40960;
  std::string policies = "exclusive,aegis,aegis-peak,aegis-horus,carma,lucid,horus,naive";
  std::string json_path;
  std::string jobs_csv;
  std::string report_path;
  std::uint64_t seed = 1;
  std::vector<std::string> sets;
  unsigned threads = 0;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Applies --set overrides: NAME=VALUE (engine, every policy), POLICY.NAME=VALUE (one
// policy), sim.NAME=VALUE (simulator models).
void apply_sets(const std::vector<std::string>& sets, const std::string& policy, EngineConfig& e, SimConfig& s) {
  for (const auto& kv : sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set: expected NAME=VALUE, got '" + kv + "'");
    const std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
    const auto dot = name.find('.');
    if (dot == std::string::npos) {
      set_param(e, name, value);
    } else if (name.substr(0, dot) == "sim") {
      set_param(s, name.substr(dot + 1), value);
    } else {
      policy_config(name.substr(0, dot));  // rejects unknown policy names
      if (name.substr(0, dot) == policy) set_param(e, name.substr(dot + 1), value);
    }
  }
}

const char* outcome_name(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::Completed: return "completed";
    case AttemptOutcome::Oom: return "oom";
    case AttemptOutcome::Stopped: return "stopped";
  }
  return "?";
}

void write_jobs_csv(const std::string& path, const std::vector<SimResult>& runs) {
  std::ofstream f(path);
  if (!f) throw InputError(path + ": cannot write file");
  f << "trace,policy,job_index,workload,num_gpus,submit_s,first_launch_s,end_s,completed,attempt,launch_s,"
       "first_activity_s,attempt_end_s,gpus,exclusive,floor_mib,outcome,solo_runtime_s\n";
  for (const auto& r : runs)
    for (const auto& j : r.jobs)
      for (std::size_t a = 0; a < j.attempts.size(); ++a) {
        const auto& at = j.attempts[a];
        std::string gpus;
        for (int g : at.gpus) gpus += (gpus.empty() ? "" : ";") + std::to_string(g);
        f << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.trace, r.policy, j.trace_index,
                         j.workload, j.num_gpus, j.submit, j.first_launch, j.end, j.completed ? 1 : 0, a + 1,
                         at.launch, at.first_activity, at.end, gpus, at.exclusive ? 1 : 0, at.floor_mib,
                         outcome_name(at.outcome), j.solo_runtime);
      }
}

std::string ratio(double x, double base) { return base > 0 ? fmt::format("{:.3f}", x / base) : "-"; }

void print_table(const std::string& trace, std::size_t njobs, const SimArgs& a, const std::vector<RunMetrics>& ms) {
  const RunMetrics* excl = nullptr;
  for (const auto& m : ms)
    if (m.policy == "exclusive") excl = &m;
  fmt::print("\n{} ({} jobs, {} x {} MiB GPUs, seed {})\n", trace, njobs, a.gpus, a.gpu_memory, a.seed);
  fmt::print("{:<12} {:>7} {:>11} {:>7} {:>10} {:>10} {:>10} {:>11} {:>4} {:>6} {:>7} {:>9} {:>7}\n", "policy",
             "done", "makespan_s", "/excl", "jct_mean_s", "jct_p95_s", "queue_mean", "exec_total", "oom", "failed",
             "slow_mx", "energy_MJ", "/excl");
  for (const auto& m : ms) {
    fmt::print("{:<12} {:>7} {:>11.0f} {:>7} {:>10.0f} {:>10.0f} {:>10.0f} {:>11.0f} {:>4} {:>6} {:>7.3f} {:>9.1f} {:>7}\n",
               m.policy, fmt::format("{}/{}", m.completed, m.jobs), m.makespan_s,
               excl ? ratio(m.makespan_s, excl->makespan_s) : "-", m.jct_mean_s, m.jct_p95_s, m.queue_mean_s,
               m.exec_total_s, m.oom_attempts, m.failed_attempts, m.slowdown_max, m.energy_j / 1e6,
               excl ? ratio(m.energy_j, excl->energy_j) : "-");
  }
}

void run_sim(const SimArgs& a) {
  if (a.traces.empty()) throw InputError("--trace: at least one trace is required");
  const auto names = split(a.policies, ',');
  if (names.empty()) throw ConfigError("--policies: at least one policy is required");
  const WorkloadCatalog catalog = WorkloadCatalog::load(a.workloads);
  std::vector<Trace> traces;
  for (const auto& t : a.traces) traces.push_back(load_aegis_trace(t, catalog));

  // Every (trace, policy) run, configured up front so that bad input fails before work.
  struct Job {
    const Trace* trace;
    SimOptions opt;
  };
  std::vector<Job> runs;
  Json policies_json = Json::object();
  SimConfig sim_used;
  for (const auto& name : names) {
    EngineConfig e = policy_config(name);
    SimConfig s;
    apply_sets(a.sets, name, e, s);
    validate(e);
    validate(s);
    sim_used = s;
    Engine probe(e);
    policies_json[name] = Json{{"stages", probe.describe()}, {"engine", to_json(describe(e))}};
    for (const auto& t : traces) {
      SimOptions o;
      o.policy_name = name;
      o.engine = e;
      o.sim = s;
      o.cluster = ClusterSpec::uniform(1, a.gpus, a.gpu_memory);
      o.seed = a.seed;
      o.record_timeline = !a.report_path.empty();
      runs.push_back({&t, o});
    }
  }

  std::vector<SimResult> results(runs.size());
  std::vector<std::string> errors(runs.size());
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned nthreads = std::min<unsigned>(a.threads ? a.threads : hw, static_cast<unsigned>(runs.size()));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < runs.size(); i = next++) {
      try {
        results[i] = simulate(catalog, *runs[i].trace, runs[i].opt);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < nthreads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (!errors[i].empty()) throw SimError(fmt::format("{} on {}: {}", runs[i].opt.policy_name, runs[i].trace->name, errors[i]));

  // Tables per trace, then the geometric mean of makespan normalised to exclusive.
  std::map<std::string, std::map<std::string, RunMetrics>> by_trace;
  Json results_json = Json::array();
  for (const auto& t : traces) {
    std::vector<RunMetrics> ms;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].trace != &t) continue;
      ms.push_back(summarize(results[i]));
      by_trace[t.name][ms.back().policy] = ms.back();
      results_json.push_back(to_json(ms.back()));
    }
    print_table(t.name, t.jobs.size(), a, ms);
  }
  Json summary = Json::object();
  const bool have_excl = std::find(names.begin(), names.end(), "exclusive") != names.end();
  if (have_excl) {
    fmt::print("\nmakespan normalised to exclusive\n{:<12}", "policy");
    for (const auto& t : traces) fmt::print(" {:>14}", t.name);
    fmt::print(" {:>9}\n", traces.size() > 1 ? "geomean" : "");
    for (const auto& name : names) {
      fmt::print("{:<12}", name);
      double logsum = 0;
      for (const auto& t : traces) {
        const double r = by_trace[t.name][name].makespan_s / by_trace[t.name]["exclusive"].makespan_s;
        logsum += std::log(r);
        fmt::print(" {:>14.3f}", r);
      }
      const double g = std::exp(logsum / static_cast<double>(traces.size()));
      summary["makespan_vs_exclusive_geomean"][name] = g;
      fmt::print(" {:>9}\n", traces.size() > 1 ? fmt::format("{:.3f}", g) : "");
    }
  }

  Json cfg;
  {
    cfg["seed"] = a.seed;
    cfg["server"] = {{"gpus", a.gpus}, {"gpu_memory_mib", a.gpu_memory}};
    cfg["workloads"] = a.workloads;
    cfg["traces"] = a.traces;
    cfg["overrides"] = a.sets;
    cfg["sim"] = to_json(describe(sim_used));
    cfg["policies"] = policies_json;
  }
  if (!a.json_path.empty()) {
    Json out;
    out["config"] = cfg;
    out["results"] = results_json;
    out["summary"] = summary;
    std::ofstream f(a.json_path);
    if (!f) throw InputError(a.json_path + ": cannot write file");
    f << out.dump(2) << "\n";
  }
  if (!a.jobs_csv.empty()) write_jobs_csv(a.jobs_csv, results);
  if (!a.report_path.empty()) {
    std::vector<ReportRun> rr;
    for (const auto& r : results) rr.push_back({&r, summarize(r)});
    write_html_report(a.report_path, "aegis sim", rr, cfg);
  }
}

}  // namespace

void add_sim(CLI::App& app) {
  static SimArgs a;
  auto* cmd = app.add_subcommand("sim", "Replay job traces through the scheduling engine under several policies");
  cmd->add_option("--workloads", a.workloads, "Profiled workload catalog (CSV)")->capture_default_str();
  cmd->add_option("--trace", a.traces, "Job trace (CSV: job_index,submit_time_s,workload_name,num_gpus); repeatable");
  cmd->add_option("--gpus", a.gpus, "GPUs in the simulated server")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--gpu-memory", a.gpu_memory, "Memory of each GPU, MiB")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--policies", a.policies, "Comma-separated policies (see `aegis policies`)")->capture_default_str();
  cmd->add_option("--json", a.json_path, "Write every figure and the full config to this JSON file");
  cmd->add_option("--jobs-csv", a.jobs_csv, "Write one row per job attempt to this CSV file");
  cmd->add_option("--report", a.report_path, "Write a self-contained HTML report with charts to this file");
  cmd->add_option("--seed", a.seed, "Seed of the simulator's random draws (same seed, same output)")->capture_default_str();
  cmd->add_option("--set", a.sets,
                  "Override a parameter: NAME=VALUE (engine, all policies), POLICY.NAME=VALUE, or sim.NAME=VALUE; "
                  "repeatable (see `aegis config`)");
  cmd->add_option("--threads", a.threads, "Runs in parallel (default: all cores)");
  cmd->callback([] { run_sim(a); });
}

}  // namespace aegis::cli
