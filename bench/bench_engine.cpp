// Micro-benchmark of one engine tick (Google Benchmark): one job asked about over GPUs
// that each hold a running job and a full telemetry window, so every stage runs.
#include <benchmark/benchmark.h>

#include "sched/engine.h"
#include "sched/policies.h"

using namespace aegis;

static void BM_Tick(benchmark::State& state) {
  const int ngpus = static_cast<int>(state.range(0));
  Engine engine(policy_config("aegis"));
  std::vector<GpuView> gpus(ngpus);
  std::vector<std::vector<GpuSample>> windows(ngpus);
  std::vector<RunningJob> running;
  for (int g = 0; g < ngpus; ++g) {
    gpus[g].index = g;
    gpus[g].total_mib = 40960;
    gpus[g].free_mib = 40960 - 8000;
    gpus[g].process_count = 1;
    for (int k = 0; k < 30; ++k) windows[g].push_back({0.5 + 0.01 * (k % 7), 0.2, 0.3, 0.6});
    gpus[g].window = windows[g];
    RunningJob r;
    r.spec.id = 1000 + g;
    r.gpus = {g};
    r.first_activity = 0;
    running.push_back(r);
  }
  QueuedJob job;
  job.spec.id = 1;
  Snapshot s;
  s.now = 1000;
  s.job = &job;  // one job per ask: the queues are the lifecycle's
  s.gpus = gpus;
  s.running = running;
  Decisions d;
  for (auto _ : state) {
    engine.tick(s, d);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_Tick)->Arg(3)->Arg(8)->Arg(64);

BENCHMARK_MAIN();
