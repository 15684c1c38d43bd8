// The whole Philly trace (82,247 jobs) on 64 servers x 8 GPUs, in process, one core:
// seconds of simulate() only (the trace is loaded once, before timing), as min / median /
// max of --runs runs, with the events and engine asks of a run and the process's peak RSS.
// bench/bench_speed.py runs it once per policy (so each RSS is that policy's) and adds the
// whole-process figures (10k jobs, 1M jobs, the published traces).
//   build/bench/bench_philly [--trace philly.csv] [--policies a,b|all] [--runs N]
//                            [--repeat K] [--max-jobs N]
// --repeat K replays the trace K times back to back (times shifted), as `aegis sim --repeat`.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <sys/resource.h>
#include <vector>

#include "sched/policies.h"
#include "sim/simulator.h"
#include "sim/workload_specs.h"

using namespace aegis;

namespace {

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

struct Timed {
  double seconds;
  std::uint64_t events, asks, visits;
};

Timed run(const WorkloadCatalog& c, const Trace& t, const std::string& policy) {
  SimOptions o;
  o.policy_name = policy;
  o.engine = policy_config(policy);
  o.cluster = ClusterSpec::uniform(64, 8, 40960);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = simulate(c, t, o);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.events, r.ticks, r.visits};
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = std::min(s.find(',', pos), s.size());
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "data/traces/philly/philly_jobs.csv";
  std::string policies = "all";
  int runs = 3;
  TraceOptions topt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--trace" && v) path = argv[++i];
    else if (a == "--policies" && v) policies = argv[++i];
    else if (a == "--runs" && v) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--repeat" && v) topt.repeat = static_cast<std::size_t>(std::max(1, std::atoi(argv[++i])));
    else if (a == "--max-jobs" && v) topt.max_jobs = static_cast<std::size_t>(std::atoll(argv[++i]));
    else {
      fmt::print(stderr, "usage: bench_philly [--trace CSV] [--policies a,b|all] [--runs N] [--repeat K] [--max-jobs N]\n");
      return 2;
    }
  }
  try {
    std::vector<std::string> names;
    if (policies == "all") {
      for (const auto& p : all_policies()) names.emplace_back(p.name);
    } else {
      names = split(policies);
    }
    auto catalog = WorkloadCatalog::load("data/aegis/workloads.csv");
    // Predicted utilisation, as `aegis sim` gives it (only aegis-learned's order reads it).
    predict_catalog_utilisation(catalog, load_workload_specs("data/aegis/workload_specs.csv"));
    const auto t0 = std::chrono::steady_clock::now();
    const Trace trace = load_trace(path, catalog, topt);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{}: {} jobs loaded and mapped in {:.3f} s; 64 x 8 x 40960 MiB; one core; {} run(s) each\n\n", path,
               trace.jobs.size(), load_s, runs);
    fmt::print("{:<14} {:>8} {:>8} {:>8} {:>11} {:>10} {:>10} {:>11} {:>8}\n", "policy", "min_s", "median_s", "max_s",
               "jobs/s", "events", "asks", "visits", "rss_MB");
    for (const auto& p : names) {
      std::vector<double> secs;
      Timed last{};
      for (int k = 0; k < runs; ++k) {
        last = run(catalog, trace, p);
        secs.push_back(last.seconds);
      }
      std::sort(secs.begin(), secs.end());
      fmt::print("{:<14} {:>8.3f} {:>8.3f} {:>8.3f} {:>11.0f} {:>10} {:>10} {:>11} {:>8.0f}\n", p, secs.front(),
                 secs[secs.size() / 2], secs.back(), static_cast<double>(trace.jobs.size()) / secs.front(),
                 last.events, last.asks, last.visits, peak_rss_mb());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_philly: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
