// `aegis sim`: replays traces through the engine under several policies on a simulated
// cluster, prints comparison tables, and records every figure with the full config.
// `--sweep` runs a parameter grid in parallel and writes one CSV row per point.
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <unordered_map>

#include "apps/aegis/commands.h"
#include "apps/aegis/run_pool.h"
#include "apps/aegis/sim_output.h"
#include "apps/aegis/sim_spread_output.h"
#include "apps/aegis/sweep.h"
#include "sched/config_params.h"
#include "sched/engine.h"
#include "sched/policies.h"
#include "sim/csv.h"
#include "sim/estimate_catalog.h"
#include "sim/json_report.h"
#include "sim/metrics.h"
#include "sim/report_html.h"
#include "sim/report_spread.h"
#include "sim/seed_spread.h"
#include "sim/simulator.h"
#include "sim/workload_specs.h"

namespace aegis::cli {

namespace {

// The engine's parameters as a run records them. Issue 32's lab parameters (fair share,
// per-user caps) are recorded only when set: a run without them records as before, byte
// for byte (tests/sim_golden.py).
Json engine_record(const EngineConfig& e) {
  Json j = to_json(describe(e));
  const EngineConfig d;
  if (e.fair_share_users == d.fair_share_users && e.fair_share_groups == d.fair_share_groups &&
      e.fair_share_half_life_s == d.fair_share_half_life_s && e.user_max_gpu_mem_mib == d.user_max_gpu_mem_mib &&
      e.user_max_running_jobs == d.user_max_running_jobs)
    for (const char* k : {"fair_share_users", "fair_share_groups", "fair_share_half_life_s", "user_max_gpu_mem_mib",
                          "user_max_running_jobs"})
      j.erase(k);
  return j;
}

struct SimArgs {
  std::string workloads = "data/aegis/workloads.csv";
  std::string specs = "data/aegis/workload_specs.csv";
  std::string calibrated_model = "held-out";
  std::vector<std::string> traces;
  std::string trace_format;
  std::string trace_runtime = "trace";
  std::size_t max_jobs = 0;
  std::size_t repeat = 1;
  double load = 1.0;
  std::uint64_t mapping_seed = 42;
  bool alibaba_qos_priority = false;    // issue 32: Alibaba `qos` as priority levels
  std::string philly_cluster_as = "none";  // issue 32: Philly `cluster` as user or group
  int gpus = 3;
  int servers = 1;
  int gpus_per_server = 8;
  std::string gpu_memory = "40960";
  std::string policies = "exclusive,aegis,aegis-peak,aegis-horus,aegis-horus-published,carma,lucid,horus,naive";
  std::string json_path, jobs_csv, mapping_csv, report_path, sweep, sweep_csv;
  std::string sharing = "process";
  std::uint64_t seed = 1;
  std::string seeds = "1";  // validated by seed_count
  std::vector<std::string> sets;
  unsigned threads = 0;
  // Which cluster options were given explicitly.
  bool gave_gpus = false, gave_servers = false, gave_gpus_per_server = false;
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

void set_any(const std::string& name, const std::string& value, EngineConfig& e, SimConfig& s) {
  if (name.rfind("sim.", 0) == 0) set_param(s, name.substr(4), value);
  else set_param(e, name, value);
}

// --set overrides: NAME=VALUE (engine, every policy), POLICY.NAME=VALUE (one policy),
// sim.NAME=VALUE (simulator models).
void apply_sets(const std::vector<std::string>& sets, const std::string& policy, EngineConfig& e, SimConfig& s) {
  for (const auto& kv : sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set: expected NAME=VALUE, got '" + kv + "'");
    const std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
    const auto dot = name.find('.');
    if (dot == std::string::npos || name.substr(0, dot) == "sim") {
      set_any(name, value, e, s);
    } else {
      policy_config(name.substr(0, dot));  // rejects unknown policy names
      if (name.substr(0, dot) == policy) set_param(e, name.substr(dot + 1), value);
    }
  }
}

ClusterSpec cluster_of(const SimArgs& a) {
  if (a.gpu_memory.find('x') != std::string::npos) {
    if (a.gave_gpus || a.gave_servers || a.gave_gpus_per_server)
      throw ConfigError("--gpu-memory SERVERSxGPUSxMIB already lists the servers; drop --gpus/--servers/--gpus-per-server");
    return ClusterSpec::parse(a.gpu_memory);
  }
  if (a.gave_gpus && (a.gave_servers || a.gave_gpus_per_server))
    throw ConfigError("--gpus is for one server; use --servers and --gpus-per-server for a cluster");
  if (a.gpu_memory.empty() || a.gpu_memory.find_first_not_of("0123456789") != std::string::npos ||
      a.gpu_memory.size() > 9 || std::stoll(a.gpu_memory) < 1)
    throw ConfigError("--gpu-memory: '" + a.gpu_memory + "' is not a positive number of MiB nor SERVERSxGPUSxMIB");
  const MiB mem = std::stoll(a.gpu_memory);
  if (a.gave_servers || a.gave_gpus_per_server) return ClusterSpec::uniform(a.servers, a.gpus_per_server, mem);
  return ClusterSpec::uniform(1, a.gpus, mem);
}

// Per point and policy: geometric mean over traces of makespan / exclusive's, and the
// worst slowdown of any job on any trace: the trade-off a threshold sweep is about.
void print_sweep_summary(const std::vector<SweepPoint>& points, const std::vector<std::string>& names,
                         std::size_t ntraces, const std::vector<RunMetrics>& metrics) {
  fmt::print("\n");
  for (const auto& [param, v] : points.front()) fmt::print("{:>18} ", param);
  fmt::print("{:<12} {:>16} {:>13} {:>12}\n", "policy", "makespan/excl", "slowdown_max", "oom_attempts");
  const std::size_t per_point = names.size() * ntraces;
  for (std::size_t p = 0; p < points.size(); ++p) {
    std::map<std::string, double> excl;
    for (std::size_t k = 0; k < per_point; ++k) {
      const auto& m = metrics[p * per_point + k];
      if (m.policy == "exclusive") excl[m.trace] = m.makespan_s;
    }
    for (const auto& name : names) {
      if (name == "exclusive") continue;
      double logsum = 0, worst = 0;
      std::int64_t ooms = 0;
      std::size_t n = 0;
      for (std::size_t k = 0; k < per_point; ++k) {
        const auto& m = metrics[p * per_point + k];
        if (m.policy != name) continue;
        if (excl.count(m.trace)) logsum += std::log(m.makespan_s / excl[m.trace]);
        worst = std::max(worst, m.slowdown_max);
        ooms += m.oom_attempts;
        ++n;
      }
      for (const auto& [param, v] : points[p]) fmt::print("{:>18} ", v);
      fmt::print("{:<12} {:>16} {:>13.3f} {:>12}\n", name,
                 excl.empty() ? std::string("-") : fmt::format("{:.3f}", std::exp(logsum / static_cast<double>(n))),
                 worst, ooms);
    }
  }
}

Json trace_record(const Trace& t) {
  Json j;
  j["name"] = t.name;
  j["path"] = t.path;
  j["format"] = to_string(t.format);
  j["jobs"] = t.jobs.size();
  j["mapping"] = t.mapping_method;
  Json counts = Json::object();
  std::map<WorkloadName, std::int64_t> by_workload;  // names in text order
  {
    // Counted by kept name first (a pointer each), then ordered: a million jobs, few names.
    std::unordered_map<const std::string*, std::int64_t> counted;
    for (const auto& job : t.jobs) counted[&job.workload.str()]++;
    for (const auto& [name, n] : counted) by_workload[WorkloadName(*name)] = n;
  }
  for (const auto& [w, n] : by_workload) counts[w.str()] = n;
  j["workload_counts"] = counts;
  Json skipped = Json::object();
  for (const auto& [why, n] : t.skipped) skipped[why] = n;
  j["skipped"] = skipped;
  return j;
}

// --seeds N: how many seeds (seed, seed+1, ...) each run is repeated under. More than
// kMaxSeeds is refused: it is a typing slip sooner than a study (8 seeds show the spread).
constexpr std::size_t kMaxSeeds = 1000;
std::size_t seed_count(const SimArgs& a) {
  const std::string& t = a.seeds;
  if (t.empty() || t.size() > 4 || t.find_first_not_of("0123456789") != std::string::npos || std::stoul(t) < 1 ||
      std::stoul(t) > kMaxSeeds)
    throw ConfigError(fmt::format("--seeds: '{}' is not a whole number from 1 to {}", t, kMaxSeeds));
  const auto n = static_cast<std::size_t>(std::stoul(t));
  if (n > 1 && a.seed > std::numeric_limits<std::uint64_t>::max() - (n - 1)) throw ConfigError("--seeds: --seed + --seeds - 1 is past the largest seed");
  return n;
}

void run_sim(const SimArgs& a) {
  const std::size_t nseeds = seed_count(a);
  std::vector<std::uint64_t> seeds;
  for (std::size_t i = 0; i < nseeds; ++i) seeds.push_back(a.seed + i);
  if (a.traces.empty()) throw InputError("--trace: at least one trace is required");
  const auto names = split(a.policies, ',');
  if (names.empty()) throw ConfigError("--policies: at least one policy is required");
  if (a.trace_runtime != "trace" && a.trace_runtime != "workload")
    throw ConfigError("--trace-runtime: '" + a.trace_runtime + "' is not one of trace, workload");
  if (!(a.load > 0)) throw ConfigError("--load: must be positive");
  ClusterSpec cluster = cluster_of(a);
  // --sharing: how jobs share a GPU (docs/sharing.md); recorded with the sim parameters.
  std::vector<std::string> sharing_sets;
  if (a.sharing == "process") {
    sharing_sets = {"sim.sharing=process"};
  } else if (a.sharing == "mps") {
    sharing_sets = {"sim.sharing=mps", "sim.mps_memory_limits=true"};
  } else if (a.sharing == "mps-nolimits") {
    sharing_sets = {"sim.sharing=mps", "sim.mps_memory_limits=false"};
  } else if (a.sharing.rfind("mig:", 0) == 0) {
    cluster = cluster.with_mig(a.sharing.substr(4));
    sharing_sets = {"sim.sharing=process"};
  } else {
    throw ConfigError("--sharing: '" + a.sharing + "' is not process, mps, mps-nolimits or mig:LAYOUT");
  }
  const auto points = a.sweep.empty() ? std::vector<SweepPoint>{SweepPoint{}} : grid(parse_sweep(a.sweep));

  WorkloadCatalog catalog = WorkloadCatalog::load(a.workloads);
  TraceOptions topt;
  if (!a.trace_format.empty()) {
    topt.format = parse_trace_format(a.trace_format);
    if (!topt.format) throw ConfigError("--trace-format: '" + a.trace_format + "' is not one of aegis, philly, alibaba");
  }
  topt.seed = a.mapping_seed;
  topt.workload_runtime = a.trace_runtime == "workload";
  topt.max_jobs = a.max_jobs;
  topt.repeat = a.repeat;
  topt.load = a.load;
  topt.alibaba_qos_priority = a.alibaba_qos_priority;
  const auto cluster_as = parse_column_role(a.philly_cluster_as);
  if (!cluster_as) throw ConfigError("--philly-cluster-as: '" + a.philly_cluster_as + "' is not one of none, user, group");
  topt.philly_cluster_as = *cluster_as;
  std::vector<Trace> traces;
  for (const auto& path : a.traces) traces.push_back(load_trace(path, catalog, topt));
  std::vector<const Trace*> trace_ptrs;
  for (const auto& t : traces) trace_ptrs.push_back(&t);

  // Every (point, policy, trace) run, configured up front so that bad input fails first.
  std::vector<RunSpec> runs;
  Json policies_json = Json::object();
  SimConfig sim_used;
  bool reads_predictions = false;  // some policy reads the jobs' predicted utilisation
  // Runs whose memory estimate comes from a model spec read this project's estimators on the
  // workloads' specs (the `ours` catalog, made below), unless the registry marks the policy
  // as replaying the published columns.
  WorkloadCatalog ours;
  std::vector<std::size_t> reads_ours;  // indices into runs
  for (const auto& point : points) {
    for (const auto& name : names) {
      EngineConfig e = policy_config(name);
      SimConfig s;
      apply_sets(sharing_sets, name, e, s);
      apply_sets(a.sets, name, e, s);
      for (const auto& [param, value] : point) set_any(param, fmt::format("{}", value), e, s);
      sim_used = s;
      reads_predictions = reads_predictions || Engine(e).reads().has(GpuFact::Predictions);
      if (point.empty()) policies_json[name] = Json{{"stages", Engine(e).describe()}, {"engine", engine_record(e)}};
      const bool from_specs = !find_policy(name)->published_estimates &&
                              (e.estimator == "analytical" || e.estimator == "horus" || e.estimator == "learned" ||
                               e.estimator == "gpumemnet" || e.estimator == "auto");
      for (const auto& t : traces) {
        RunSpec r;
        r.catalog = &catalog;
        r.trace = &t;
        r.options.policy_name = name;
        r.options.engine = e;
        r.options.sim = s;
        r.options.cluster = cluster;
        r.options.seed = a.seed;
        r.options.record_timeline = !a.report_path.empty();
        if (from_specs) reads_ours.push_back(runs.size());
        runs.push_back(std::move(r));
      }
    }
  }
  // Only then are the specs read (and recorded), so other policies' runs do not depend on them.
  std::vector<WorkloadSpec> specs;
  if (reads_predictions || !reads_ours.empty()) specs = load_workload_specs(a.specs);
  if (reads_predictions) predict_catalog_utilisation(catalog, specs);
  if (!reads_ours.empty()) {
    if (a.calibrated_model == "held-out") {
      ours = with_our_estimates_held_out(catalog, specs);
    } else {
      // The chain as aegisd runs it with calibrated_model set, on the catalog's GPU model.
      EstimateChain chain;
      chain.set_server_models({kCatalogGpuModel});
      try {
        std::ifstream in(a.calibrated_model);
        if (!in) throw std::runtime_error("cannot open " + a.calibrated_model);
        chain.set_calibrated(CalibratedModel::from_json(nlohmann::json::parse(in)));
      } catch (const std::exception& e) {
        throw InputError(std::string("--calibrated-model: ") + e.what());
      }
      ours = with_our_estimates(catalog, specs, chain);
    }
    for (std::size_t i : reads_ours) runs[i].catalog = &ours;
  }
  // --seeds N: the same runs again under each further seed, seed by seed (per_seed runs each);
  // the report draws the first seed's runs, so only they record a timeline.
  const std::size_t per_seed = runs.size();
  for (std::size_t i = 1; i < nseeds; ++i)
    for (std::size_t k = 0; k < per_seed; ++k) {
      RunSpec r = runs[k];
      r.options.seed = seeds[i];
      r.options.record_timeline = false;
      runs.push_back(std::move(r));
    }
  const auto results = run_all(runs, a.threads);
  std::vector<RunMetrics> metrics;
  for (const auto& r : results) metrics.push_back(summarize(r));

  Json cfg;
  cfg["seed"] = a.seed;
  if (nseeds > 1) cfg["seeds"] = seeds;
  cfg["cluster"] = {{"servers", cluster.servers.size()}, {"gpus", cluster.total_gpus()}, {"describe", cluster.describe()}};
  cfg["workloads"] = a.workloads;
  if (reads_predictions || !reads_ours.empty()) cfg["workload_specs"] = a.specs;
  if (!reads_ours.empty()) cfg["calibrated_model"] = a.calibrated_model;
  cfg["traces"] = Json::array();
  for (const auto& t : traces) cfg["traces"].push_back(trace_record(t));
  cfg["trace_options"] = {{"runtime", a.trace_runtime}, {"mapping_seed", a.mapping_seed}, {"max_jobs", a.max_jobs}, {"load", a.load}};
  if (a.repeat != 1) cfg["trace_options"]["repeat"] = a.repeat;
  // Recorded only when set: runs without keep their bytes.
  if (a.alibaba_qos_priority) cfg["trace_options"]["alibaba_qos_priority"] = true;
  if (*cluster_as != TraceColumnRole::None) cfg["trace_options"]["philly_cluster_as"] = to_string(*cluster_as);
  cfg["sharing"] = a.sharing;
  cfg["overrides"] = a.sets;
  if (!a.sweep.empty()) cfg["sweep"] = a.sweep;
  cfg["sim"] = to_json(describe(sim_used));
  cfg["policies"] = policies_json;

  SeedSpread spread;  // --seeds N > 1
  if (!a.sweep.empty()) {
    // One CSV row per (seed, point, policy, trace); a summary per (point, policy) on stdout.
    std::ofstream file;
    if (!a.sweep_csv.empty()) {
      file.open(a.sweep_csv);
      if (!file) throw InputError(a.sweep_csv + ": cannot write file");
    }
    std::ostream& out = a.sweep_csv.empty() ? std::cout : file;
    std::string head = nseeds > 1 ? "seed," : "";  // a seed column only when there are several
    for (const auto& [param, v] : points.front()) head += param + ",";
    out << head << "policy,trace,makespan_s,makespan_vs_exclusive,jct_mean_s,jct_p95_s,queue_mean_s,exec_total_s,"
                   "oom_attempts,failed_attempts,slowdown_mean,slowdown_max,energy_j\n";
    std::size_t i = 0;
    const std::size_t per_point = names.size() * traces.size();
    for (std::size_t p = 0; p < points.size() * nseeds; ++p) {  // p: (seed, point), seed first
      std::map<std::string, double> excl;
      for (std::size_t k = 0; k < per_point; ++k) {
        const auto& m = metrics[p * per_point + k];
        if (m.policy == "exclusive") excl[m.trace] = m.makespan_s;
      }
      for (std::size_t k = 0; k < per_point; ++k, ++i) {
        const auto& m = metrics[i];
        std::string vals = nseeds > 1 ? fmt::format("{},", seeds[p / points.size()]) : "";
        for (const auto& [param, v] : points[p % points.size()]) vals += fmt::format("{},", v);
        out << vals
            << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", m.policy, m.trace, m.makespan_s,
                           excl.count(m.trace) ? fmt::format("{}", m.makespan_s / excl[m.trace]) : "", m.jct_mean_s,
                           m.jct_p95_s, m.queue_mean_s, m.exec_total_s, m.oom_attempts, m.failed_attempts,
                           m.slowdown_mean, m.slowdown_max, m.energy_j);
      }
    }
    if (!a.sweep_csv.empty()) {
      fmt::print("sweep: {} points x {} policies x {} traces{} = {} runs written to {}\n", points.size(), names.size(),
                 traces.size(), nseeds > 1 ? fmt::format(" x {} seeds", nseeds) : "", runs.size(), a.sweep_csv);
      if (nseeds > 1) print_sweep_spread(points, names, traces.size(), nseeds, metrics);
      else print_sweep_summary(points, names, traces.size(), metrics);
    }
  } else if (nseeds > 1) {
    std::vector<std::vector<RunMetrics>> by_seed(nseeds);
    for (std::size_t k = 0; k < metrics.size(); ++k) by_seed[k / per_seed].push_back(metrics[k]);
    spread = gather(seeds, by_seed);
    for (const auto& t : traces) print_table_spread(t, cluster.describe(), spread);
    const auto norm = print_normalised_spread(trace_ptrs, names, spread);
    if (!a.json_path.empty()) {
      Json out;
      out["config"] = cfg;
      spread_json(out, spread, norm);
      std::ofstream f(a.json_path);
      if (!f) throw InputError(a.json_path + ": cannot write file");
      f << out.dump(2) << "\n";
    }
  } else {
    for (const auto& t : traces) {
      std::vector<RunMetrics> ms;
      for (const auto& m : metrics)
        if (m.trace == t.name) ms.push_back(m);
      print_table(t, cluster.describe(), a.seed, ms);
    }
    const auto norm = print_normalised(trace_ptrs, names, metrics);
    if (!a.json_path.empty()) {
      Json out;
      out["config"] = cfg;
      out["results"] = Json::array();
      for (const auto& m : metrics) out["results"].push_back(to_json(m));
      out["summary"] = Json::object();
      for (const auto& [p, g] : norm) out["summary"]["makespan_vs_exclusive_geomean"][p] = g;
      std::ofstream f(a.json_path);
      if (!f) throw InputError(a.json_path + ": cannot write file");
      f << out.dump(2) << "\n";
    }
  }
  if (!a.jobs_csv.empty()) {
    std::vector<std::uint64_t> seed_of_run;  // a seed column only when there are several
    if (nseeds > 1)
      for (std::size_t k = 0; k < results.size(); ++k) seed_of_run.push_back(seeds[k / per_seed]);
    write_jobs_csv(a.jobs_csv, results, seed_of_run);
  }
  if (!a.mapping_csv.empty()) write_mapping_csv(a.mapping_csv, trace_ptrs);
  if (!a.report_path.empty()) {
    std::vector<ReportRun> rr;
    for (std::size_t k = 0; k < per_seed; ++k) rr.push_back({&results[k], metrics[k]});
    std::vector<std::string> trace_names;
    for (const auto& t : traces) trace_names.push_back(t.name);
    write_html_report(a.report_path, "aegis sim: " + cluster.describe(), rr, cfg,
                      nseeds > 1 && a.sweep.empty() ? spread_html(spread, trace_names, names) : std::string());
  }
}

}  // namespace

void add_sim(CLI::App& app) {
  static SimArgs a;
  auto* cmd = app.add_subcommand("sim", "Replay job traces through the scheduling engine under several policies");
  cmd->add_option("--workloads", a.workloads, "Profiled workload catalog (CSV)")->capture_default_str();
  cmd->add_option("--specs", a.specs,
                  "Model specs of the catalog's workloads (CSV), for their predicted utilisation (aegis-learned) "
                  "and this project's memory estimates (aegis-horus, aegis-learned, aegis-auto)")
      ->capture_default_str();
  cmd->add_option("--calibrated-model", a.calibrated_model,
                  "Calibrated memory estimator of the estimate chain, the learned figure of a workload with a spec "
                  "(aegis-learned, aegis-auto): held-out (fitted per workload on the catalog's other models' peaks) "
                  "or a JSON file (data/models/calibrated_memory.json was fitted on these workloads: in-sample)")
      ->capture_default_str();
  cmd->add_option("--trace", a.traces, "Job trace (CSV); repeatable");
  cmd->add_option("--trace-format", a.trace_format, "aegis, philly or alibaba (default: detected from the header)");
  cmd->add_option("--trace-runtime", a.trace_runtime,
                  "Production traces: run each job for its own duration (trace) or its workload's solo runtime "
                  "(workload, as the published evaluation did)")
      ->capture_default_str();
  cmd->add_option("--max-jobs", a.max_jobs, "Keep only the first N jobs of each trace by submit time (0 = all)");
  cmd->add_option("--repeat", a.repeat,
                  "Replay each trace N times back to back (after --max-jobs and the mapping; each copy shifted by "
                  "the trace's span): scaling studies, e.g. --repeat 13 makes Philly 1.07M jobs")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--load", a.load, "Divide inter-arrival times by this factor (1.5 = 50 % more demand)")
      ->capture_default_str();
  cmd->add_flag("--alibaba-qos-priority", a.alibaba_qos_priority,
               "Alibaba traces: each pod's qos class as its priority level (LS and Guaranteed 2, Burstable 1, BE 0; "
               "default off: all 0); with --set sim.preemption=true higher levels may preempt lower ones");
  cmd->add_option("--philly-cluster-as", a.philly_cluster_as,
                  "Philly traces: each job's virtual cluster (a team) as its user or group for fair share "
                  "(none, user, group); user also reports each cluster's GPU share")
      ->capture_default_str();
  cmd->add_option("--mapping-seed", a.mapping_seed, "Seed of the job-to-workload mapping of production traces")
      ->capture_default_str();
  auto* g = cmd->add_option("--gpus", a.gpus, "GPUs of a single simulated server")->capture_default_str()->check(CLI::Range(1, 4096));
  auto* s = cmd->add_option("--servers", a.servers, "Servers in the simulated cluster")->check(CLI::Range(1, 100000));
  auto* gs = cmd->add_option("--gpus-per-server", a.gpus_per_server, "GPUs per server (with --servers)")
                 ->capture_default_str()
                 ->check(CLI::Range(1, 4096));
  cmd->add_option("--gpu-memory", a.gpu_memory,
                  "Memory of each GPU in MiB, or server types as SERVERSxGPUSxMIB,... (e.g. 2x8x40960,4x8x81920)")
      ->capture_default_str();
  cmd->add_option("--policies", a.policies, "Comma-separated policies (see `aegis policies`)")->capture_default_str();
  cmd->add_option("--sharing", a.sharing,
                  "How jobs share a GPU: process (time slicing), mps (with per-job memory limits; one user's jobs "
                  "per GPU), mps-nolimits, or mig:PROFILES of the GPU's model, known by its memory (e.g. "
                  "mig:3g.20gb,2g.10gb,1g.5gb,1g.5gb on 40960 MiB A100s; ';' between per-GPU lists)")
      ->capture_default_str();
  cmd->add_option("--json", a.json_path, "Write every figure and the full config to this JSON file");
  cmd->add_option("--jobs-csv", a.jobs_csv, "Write one row per job attempt to this CSV file");
  cmd->add_option("--mapping", a.mapping_csv, "Write each job's borrowed workload to this CSV file");
  cmd->add_option("--report", a.report_path, "Write a self-contained HTML report with charts to this file");
  cmd->add_option("--seed", a.seed, "Seed of the simulator's random draws (same seed, same output)")->capture_default_str();
  cmd->add_option("--seeds", a.seeds,
                  "Run every policy under N seeds (--seed, --seed+1, ...; 1 to 1000) and show each figure as the "
                  "mean and min-max over them, with the pairs of policies within that spread (not a result); the "
                  "seed draws each attempt's first-activity delay and telemetry noise (docs/simulator.md \"Seeds\"); "
                  "with --sweep, a seed column and the spread per point")
      ->capture_default_str()
      ->type_name("N");
  cmd->add_option("--set", a.sets,
                  "Override a parameter: NAME=VALUE (engine, all policies), POLICY.NAME=VALUE, or sim.NAME=VALUE; "
                  "repeatable (see `aegis config`)");
  cmd->add_option("--sweep", a.sweep,
                  "Run a grid: NAME=FROM:TO:STEP,... over engine or sim.* parameters (smact, smocc, drama, util "
                  "abbreviate the thresholds)");
  cmd->add_option("--sweep-csv", a.sweep_csv, "Write the sweep's rows to this CSV file (default: standard output)");
  cmd->add_option("--threads", a.threads, "Runs in parallel (default: all cores)");
  cmd->callback([g, s, gs] {
    a.gave_gpus = g->count() > 0;
    a.gave_servers = s->count() > 0;
    a.gave_gpus_per_server = gs->count() > 0;
    run_sim(a);
  });
}

}  // namespace aegis::cli
