// Times the simulator on the published evaluation: 3 traces x every policy, on one core.
// Target (issue 2): the whole set in under 1 s. Prints figures, never fails on speed.
//   build/bench/bench_published [data-dir] [repetitions]
#include <chrono>
#include <fmt/format.h>
#include <string>

#include "sched/policies.h"
#include "sim/simulator.h"
#include "sim/workload_specs.h"

using namespace aegis;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "data/aegis";
  const int reps = argc > 2 ? std::stoi(argv[2]) : 5;
  try {
    auto catalog = WorkloadCatalog::load(dir + "/workloads.csv");
    // Predicted utilisation, as `aegis sim` gives it (only aegis-learned's order reads it).
    predict_catalog_utilisation(catalog, load_workload_specs(dir + "/workload_specs.csv"));
    std::vector<Trace> traces;
    for (const char* t : {"philly", "saturn", "venus"})
      traces.push_back(load_aegis_trace(dir + "/trace_" + t + ".csv", catalog));

    double best = 1e300;
    std::uint64_t events = 0, ticks = 0, jobs = 0, runs = 0;
    for (int rep = 0; rep < reps; ++rep) {
      events = ticks = jobs = runs = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& p : all_policies()) {
        for (const auto& t : traces) {
          SimOptions o;
          o.policy_name = std::string(p.name);
          o.engine = policy_config(p.name);
          o.cluster = ClusterSpec::uniform(1, 3, 40960);
          const auto r = simulate(catalog, t, o);
          events += r.events;
          ticks += r.ticks;
          jobs += r.jobs.size();
          ++runs;
        }
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s);
    }
    fmt::print("published set: {} runs ({} traces x {} policies), {} jobs, {} events, {} engine ticks\n", runs,
               traces.size(), all_policies().size(), jobs, events, ticks);
    fmt::print("wall time (best of {}): {:.4f} s on one core; target < 1 s; {:.1f}x under target\n", reps, best,
               1.0 / best);
    fmt::print("per run: {:.3f} ms; {:.0f} simulated jobs/s; {:.0f} events/s; {:.2f} us per engine tick+event\n",
               1e3 * best / static_cast<double>(runs), static_cast<double>(jobs) / best,
               static_cast<double>(events) / best, 1e6 * best / static_cast<double>(events + ticks));
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_published: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
