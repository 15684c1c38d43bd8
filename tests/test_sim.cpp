// Simulator mechanics on small hand-made workloads: solo runs, collocation and its
// slowdown, OOM and recovery, energy, and input errors.
#include <gtest/gtest.h>

#include "sched/policies.h"
#include "sim/csv.h"
#include "sim/metrics.h"
#include "sim/models/startup.h"
#include "sim/simulator.h"

namespace aegis {
namespace {

WorkloadProfile workload(const std::string& name, MiB peak, double smact, double drama, Seconds runtime, int gpus = 1) {
  WorkloadProfile w;
  w.name = name;
  w.num_gpus = gpus;
  w.peak_mib = peak;
  w.smact = smact;
  w.smocc = smact / 3;
  w.drama = drama;
  w.util = smact;
  w.solo_runtime_s = runtime;
  w.estimates.profiled = peak;
  w.hints.gpu_util = smact;
  w.hints.sharing_score = 0;
  return w;
}

struct Case {
  WorkloadCatalog catalog;
  Trace trace;
  void add(std::int64_t index, Seconds submit, const std::string& name) {
    TraceJob j;
    j.index = index;
    j.submit_time = submit;
    j.workload = name;
    j.num_gpus = catalog.find(name)->num_gpus;
    j.where = "test:" + std::to_string(index);
    trace.jobs.push_back(j);
  }
  SimResult run(const std::string& policy, int gpus, MiB memory, std::uint64_t seed = 1) {
    SimOptions o;
    o.policy_name = policy;
    o.engine = policy_config(policy);
    o.cluster = ClusterSpec::uniform(1, gpus, memory);
    o.seed = seed;
    return simulate(catalog, trace, o);
  }
};

TEST(Sim, SoloJobRunsItsSoloRuntime) {
  Case c;
  c.catalog.add(workload("w", 4000, 0.5, 0.2, 100));
  c.add(0, 10, "w");
  const auto r = c.run("aegis", 1, 40960);
  ASSERT_EQ(r.jobs.size(), 1u);
  const auto& j = r.jobs[0];
  EXPECT_TRUE(j.completed);
  EXPECT_DOUBLE_EQ(j.first_launch, 10);
  EXPECT_NEAR(j.end, 110, 1e-9);
  const auto m = summarize(r);
  EXPECT_NEAR(m.makespan_s, 100, 1e-9);
  EXPECT_NEAR(m.slowdown_max, 1.0, 1e-12);
  EXPECT_EQ(m.oom_attempts, 0);
  // Energy: idle power until first activity, then idle + (max - idle) * SMACT.
  const double active = 110 - j.attempts[0].first_activity;
  EXPECT_NEAR(m.energy_j, 50.0 * 100 + 350.0 * 0.5 * active, 1e-6);
  EXPECT_NEAR(m.gpu_mem_util_mean, 0, 0.1);
}

TEST(Sim, CollocationWaitsForTheObservationWindowAndSlowsBoth) {
  Case c;
  c.catalog.add(workload("light", 3000, 0.3, 0.1, 1000));
  c.add(0, 0, "light");
  c.add(1, 1, "light");
  const auto r = c.run("aegis", 1, 40960);
  const auto& a = r.jobs[0].attempts[0];
  const auto& b = r.jobs[1].attempts[0];
  // The second job joins exactly when the gate opens: 30 s after the first one's activity.
  EXPECT_NEAR(b.launch, a.first_activity + 30, 1e-9);
  // Both slow down while they overlap, per the interference model.
  const double s = 1.0 / (1 + 0.28 * 0.09 + 0.45 * 0.01);
  EXPECT_GT(a.end - a.launch, 1000);
  EXPECT_GT(b.end - b.launch, 1000);
  EXPECT_LT(summarize(r).slowdown_max, 1.0 / s + 1e-9);
  // Exclusive runs them one after the other.
  const auto ex = c.run("exclusive", 1, 40960);
  EXPECT_NEAR(ex.jobs[1].first_launch, ex.jobs[0].end, 1e-9);
  EXPECT_LT(summarize(r).makespan_s, summarize(ex).makespan_s);
}

TEST(Sim, PressureKeepsBusyGpusAlone) {
  Case c;
  c.catalog.add(workload("heavy", 3000, 0.9, 0.6, 500));
  c.add(0, 0, "heavy");
  c.add(1, 1, "heavy");
  const auto r = c.run("aegis", 1, 40960);
  // SMACT 0.9 with DRAMA 0.6 is over the thresholds: the second job waits for the first.
  EXPECT_NEAR(r.jobs[1].first_launch, r.jobs[0].end, 1e-9);
  // Without the pressure filter they share.
  SimOptions o;
  o.engine = policy_config("aegis");
  o.engine.pressure_filter = false;
  o.cluster = ClusterSpec::uniform(1, 1, 40960);
  const auto r2 = simulate(c.catalog, c.trace, o);
  EXPECT_LT(r2.jobs[1].first_launch, r2.jobs[0].end);
}

TEST(Sim, OomWhenRealPeaksExceedCapacityThenRecovery) {
  Case c;
  c.catalog.add(workload("big", 7000, 0.2, 0.05, 300));
  for (int i = 0; i < 3; ++i) c.add(i, i, "big");
  // Naive packs all three on the 16000 MiB GPU before any has allocated.
  const auto r = c.run("naive", 1, 16000);
  const auto m = summarize(r);
  EXPECT_EQ(m.completed, 3);
  EXPECT_GE(m.oom_attempts, 1);
  EXPECT_EQ(m.failed_attempts, m.oom_attempts);
  // The failed attempts' time counts as execution.
  double solo = 3 * 300;
  EXPECT_GT(m.exec_total_s, solo);
  bool retried_with_floor = false;
  for (const auto& j : r.jobs)
    for (std::size_t k = 1; k < j.attempts.size(); ++k)
      retried_with_floor |= j.attempts[k].floor_mib > 0 || j.attempts[k].exclusive;
  EXPECT_TRUE(retried_with_floor);
  // AEGIS's observation window sees the first job's memory before placing the next.
  EXPECT_EQ(summarize(c.run("aegis", 1, 16000)).oom_attempts, 0);
}

TEST(Sim, MultiGpuJobsHoldAllTheirGpus) {
  Case c;
  c.catalog.add(workload("pair", 20000, 0.8, 0.3, 200, 2));
  c.catalog.add(workload("one", 1000, 0.1, 0.0, 50));
  c.add(0, 0, "pair");
  c.add(1, 0, "one");
  const auto r = c.run("exclusive", 3, 40960);
  EXPECT_EQ(r.jobs[0].attempts[0].gpus.size(), 2u);
  EXPECT_EQ(r.jobs[1].attempts[0].gpus, std::vector<int>{2});
}

TEST(Sim, RejectsJobsLargerThanTheServer) {
  Case c;
  c.catalog.add(workload("pair", 20000, 0.8, 0.3, 200, 2));
  c.add(0, 0, "pair");
  try {
    c.run("aegis", 1, 40960);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "test:0: field 'num_gpus': job 0 needs 2 GPUs; the simulated server has 1");
  }
}

TEST(Sim, JobThatNeverFitsStopsInsteadOfHanging) {
  Case c;
  c.catalog.add(workload("huge", 50000, 0.5, 0.2, 100));
  c.add(0, 0, "huge");
  const auto r = c.run("aegis", 1, 40960);
  EXPECT_FALSE(r.jobs[0].completed);
  EXPECT_EQ(r.jobs[0].stop_reason, "out of memory while running alone on its GPU");
  EXPECT_EQ(summarize(r).stopped, 1);
}

}  // namespace
}  // namespace aegis
