// Helpers that build engine snapshots by hand for the stage and engine tests.
#pragma once
#include <vector>

#include "sched/engine.h"
#include "sched/policies.h"

namespace aegis::test {

inline QueuedJob job(JobId id, int gpus = 1, std::optional<MiB> profiled = std::nullopt) {
  QueuedJob q;
  q.spec.id = id;
  q.spec.name = "job" + std::to_string(id);
  q.spec.num_gpus = gpus;
  q.spec.estimates.profiled = profiled;
  return q;
}

// A hand-built world: GPUs, running jobs, telemetry windows. The engine is asked about
// one job at a time (the queues are the lifecycle's: tests/test_lifecycle_queue.cpp).
struct World {
  std::vector<GpuView> gpus;
  std::vector<std::vector<GpuSample>> windows;
  std::vector<RunningJob> running;
  Seconds now = 100;
  EngineState state;

  explicit World(int n, MiB total = 40960) {
    gpus.resize(n);
    windows.resize(n);
    for (int i = 0; i < n; ++i) {
      gpus[i].index = i;
      gpus[i].uuid = "GPU-" + std::to_string(i);
      gpus[i].total_mib = total;
      gpus[i].free_mib = total;
    }
  }

  // Fills GPU g's window with `n` identical samples.
  void busy(int g, double smact, double smocc, double drama, double util = 0, int n = 30) {
    windows[g].assign(n, GpuSample{smact, smocc, drama, util});
  }

  // A job already running on `on`, active since long enough that no gate is closed.
  RunningJob& run(JobId id, std::vector<int> on, MiB used_per_gpu, Seconds launched = 0,
                  std::optional<Seconds> first_activity = 1.0) {
    RunningJob r;
    r.spec.id = id;
    r.spec.num_gpus = static_cast<int>(on.size());
    r.gpus.assign(on.begin(), on.end());
    r.launched_at = launched;
    r.first_activity = first_activity;
    r.admitted_mib = used_per_gpu;
    r.gpu_total_mib = gpus[on[0]].total_mib;
    for (int g : on) {
      gpus[g].free_mib -= used_per_gpu;
      gpus[g].process_count += first_activity ? 1 : 0;
    }
    running.push_back(r);
    return running.back();
  }

  // The GPUs with their windows, as a tick or a placer sees them.
  std::vector<GpuView>& views() {
    for (std::size_t i = 0; i < gpus.size(); ++i) gpus[i].window = windows[i];
    return gpus;
  }

  // The snapshot of one ask: this job on these GPUs.
  Snapshot snapshot_of(const QueuedJob& job) {
    Snapshot s;
    s.now = now;
    s.job = &job;
    s.gpus = views();
    s.running = running;
    s.state = state;
    return s;
  }

  Decisions tick(const Engine& e, const QueuedJob& job) { return e.tick(snapshot_of(job)); }
};

inline Engine engine(const std::string& policy = "aegis", void (*tweak)(EngineConfig&) = nullptr) {
  EngineConfig c = policy_config(policy);
  if (tweak) tweak(c);
  return Engine(c);
}

}  // namespace aegis::test
