// The whole Philly trace (82,247 jobs) on 64 servers x 8 GPUs, every policy, one core.
// Targets (issue 3): each policy under 1 s (>= 100,000 simulated jobs per second) and
// peak memory under 500 MB. Then the cost curve: 10k, 100k, 1M jobs (the trace repeated
// with shifted times) for one policy, which should grow about linearly.
//   build/bench/bench_philly [philly.csv] [policy-for-scaling] [max-jobs-for-scaling]
#include <chrono>
#include <fmt/format.h>
#include <string>
#include <sys/resource.h>

#include "sched/policies.h"
#include "sim/simulator.h"

using namespace aegis;

namespace {

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

struct Timed {
  double seconds;
  SimResult result;
};

Timed run(const WorkloadCatalog& c, const Trace& t, const std::string& policy) {
  SimOptions o;
  o.policy_name = policy;
  o.engine = policy_config(policy);
  o.cluster = ClusterSpec::uniform(64, 8, 40960);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = simulate(c, t, o);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), std::move(r)};
}

// The trace repeated `copies` times, each copy shifted by the trace's span.
Trace repeated(const Trace& t, std::size_t jobs) {
  Trace out = t;
  out.jobs.clear();
  const Seconds span = t.jobs.back().submit_time + 1;
  for (std::size_t k = 0; out.jobs.size() < jobs; ++k)
    for (const auto& j : t.jobs) {
      if (out.jobs.size() >= jobs) break;
      TraceJob c = j;
      c.index = static_cast<std::int64_t>(out.jobs.size());
      c.submit_time += static_cast<double>(k) * span;
      out.jobs.push_back(std::move(c));
    }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "data/traces/philly/philly_jobs.csv";
  const std::string scaling_policy = argc > 2 ? argv[2] : "aegis";
  const std::size_t max_scale = argc > 3 ? std::stoul(argv[3]) : 1000000;
  try {
    const auto catalog = WorkloadCatalog::load("data/aegis/workloads.csv");
    auto t0 = std::chrono::steady_clock::now();
    const Trace trace = load_trace(path, catalog);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("Philly: {} jobs loaded and mapped in {:.2f} s; 64 x 8 x 40960 MiB; one core\n\n", trace.jobs.size(), load_s);
    fmt::print("{:<12} {:>8} {:>12} {:>10} {:>12} {:>10} {:>9}\n", "policy", "seconds", "jobs/s", "events", "events/s",
               "probes", "peak_MB");
    for (const auto& p : all_policies()) {
      const auto r = run(catalog, trace, std::string(p.name));
      fmt::print("{:<12} {:>8.3f} {:>12.0f} {:>10} {:>12.0f} {:>10} {:>9.0f}{}\n", p.name, r.seconds,
                 static_cast<double>(trace.jobs.size()) / r.seconds, r.result.events,
                 static_cast<double>(r.result.events) / r.seconds, r.result.ticks, peak_rss_mb(),
                 r.seconds < 1.0 ? "" : "   (over the 1 s target)");
    }
    fmt::print("\ncost growth, policy {} (trace repeated with shifted times)\n", scaling_policy);
    fmt::print("{:>9} {:>9} {:>12} {:>14} {:>9}\n", "jobs", "seconds", "jobs/s", "s per 10k jobs", "peak_MB");
    for (std::size_t n = 10000; n <= max_scale; n *= 10) {
      const auto r = run(catalog, repeated(trace, n), scaling_policy);
      fmt::print("{:>9} {:>9.2f} {:>12.0f} {:>14.3f} {:>9.0f}\n", n, r.seconds, static_cast<double>(n) / r.seconds,
                 r.seconds / static_cast<double>(n) * 1e4, peak_rss_mb());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_philly: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
