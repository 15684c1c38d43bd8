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
    j.num_gpus = static_cast<std::int16_t>(catalog.find(name)->num_gpus);
    j.line = static_cast<std::uint32_t>(index) + 2;  // as if row `index` of a CSV file "test"
    trace.path = "test";
    trace.jobs.push_back(j);
  }
  SimResult run(const std::string& policy, int gpus, MiB memory, std::uint64_t seed = 1,
                const std::string& sharing = "process") {
    SimOptions o;
    o.policy_name = policy;
    o.engine = policy_config(policy);
    o.sim.sharing = sharing;
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
  // Both slow down while both are active, at the speed the interference model gives with
  // the simulator's own coefficients (util 0.3 and DRAM activity 0.1 each): the first runs
  // alone until the second's first activity, then at speed s until it ends; the second
  // runs at s over the same span, then alone again.
  const SimConfig cfg;
  const double s = 1.0 / (1 + cfg.interference_util_coeff * 0.3 * 0.3 + cfg.interference_dram_coeff * 0.1 * 0.1);
  ASSERT_GT(b.first_activity, b.launch);
  const double a_left = 1000 - (b.first_activity - a.launch);  // a's work left when b shows activity
  ASSERT_GT(a_left, 0);
  EXPECT_NEAR(a.end, b.first_activity + a_left / s, 1e-6);
  EXPECT_NEAR(b.end, a.end + 1000 - (b.first_activity - b.launch) - a_left, 1e-6);
  // Without interference both would end 1000 s after launch; the model stretches the first
  // by a_left * (1/s - 1), far beyond the tolerance above.
  EXPECT_GT(a.end - (a.launch + 1000), 10);
  // Exclusive runs them one after the other.
  const auto ex = c.run("exclusive", 1, 40960);
  EXPECT_NEAR(ex.jobs[1].first_launch, ex.jobs[0].end, 1e-9);
  EXPECT_LT(summarize(r).makespan_s, summarize(ex).makespan_s);
}

// Two co-located jobs' coarse utilisation: the union of their speed-scaled busy periods
// (sim.util_combination = union, the default), or their capped sum; SM activity is summed
// either way.
TEST(Sim, CoLocatedUtilisationCombinesByTheConfiguredRule) {
  Case c;
  c.catalog.add(workload("light", 3000, 0.3, 0.1, 1000));
  c.add(0, 0, "light");
  c.add(1, 1, "light");
  const SimConfig defaults;
  const double s = 1.0 / (1 + defaults.interference_util_coeff * 0.3 * 0.3 +
                          defaults.interference_dram_coeff * 0.1 * 0.1);
  for (const std::string rule : {"union", "sum"}) {
    SCOPED_TRACE(rule);
    SimOptions o;
    o.policy_name = "aegis";
    o.engine = policy_config("aegis");
    o.cluster = ClusterSpec::uniform(1, 1, 40960);
    o.sim.util_combination = rule;
    o.record_timeline = true;
    const auto r = simulate(c.catalog, c.trace, o);
    ASSERT_EQ(r.gpu_timeline.size(), 1u);
    int both = 0;
    for (const auto& p : r.gpu_timeline[0]) {
      if (p.active != 2) continue;
      ++both;
      EXPECT_NEAR(p.smact, 2 * s * 0.3, 1e-9);
      EXPECT_NEAR(p.util, rule == "union" ? 1 - (1 - s * 0.3) * (1 - s * 0.3) : 2 * s * 0.3, 1e-9);
    }
    EXPECT_GT(both, 0);
  }
  SimConfig bad;
  EXPECT_THROW(set_param(bad, "util_combination", "max"), ConfigError);
}

// Under MPS the second user's job waits for the GPU to hold none of the first user's jobs
// (NVIDIA's control daemon serves one user at a time); the same user's job joins.
TEST(Sim, MpsCollocatesOnlyOneUsersJobs) {
  for (const std::int32_t second_owner : {0, 1}) {
    SCOPED_TRACE(second_owner);
    Case c;
    c.catalog.add(workload("light", 3000, 0.3, 0.1, 1000));
    c.add(0, 0, "light");
    c.add(1, 1, "light");
    c.trace.jobs[0].owner = 0;
    c.trace.jobs[1].owner = second_owner;
    const auto r = c.run("aegis", 1, 40960, 1, "mps");
    const auto& a = r.jobs[0].attempts.back();
    const auto& b = r.jobs[1].attempts.front();
    if (second_owner == 0) {
      EXPECT_LT(b.launch, a.end);  // side by side, once the observation window passed
    } else {
      EXPECT_GE(b.launch, a.end);  // only after the first user's job left the GPU
    }
  }
}

// Estimator-free under MPS, a job larger than the floor plus the margin (7,168 MiB) is not
// killed by its own limit (issue 30: every such job died at it first, 56 in the sharing
// study): nothing is known of it, so its limit is its GPU's free memory at placement. Two
// 12,000 MiB jobs on a 40,960 MiB GPU run without a death; with an estimate the limit is
// the estimate plus the margin, and a job that outgrows it still dies alone.
TEST(Sim, MpsLimitOfAnEstimatorFreeJobIsNotTheFloor) {
  Case c;
  c.catalog.add(workload("mid", 12000, 0.2, 0.05, 300));
  c.add(0, 0, "mid");
  c.add(1, 1, "mid");
  const auto m = summarize(c.run("aegis", 1, 40960, 1, "mps"));
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.oom_attempts, 0);
  EXPECT_EQ(m.mps_limit_attempts, 0);
  Case under;  // the analytical estimate says 6000: it dies at 6000 + margin, alone
  auto w = workload("mid", 12000, 0.2, 0.05, 300);
  w.estimates.analytical = 6000;
  under.catalog.add(w);
  under.add(0, 0, "mid");
  const auto u = summarize(under.run("aegis-horus", 1, 40960, 1, "mps"));
  EXPECT_EQ(u.completed, 1);
  EXPECT_GE(u.mps_limit_attempts, 1);
  EXPECT_EQ(u.neighbour_oom_attempts, 0);
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
    EXPECT_STREQ(e.what(), "test:2: field 'num_gpus': job 0 needs 2 GPUs; the simulated cluster has 1");
  }
}

TEST(Sim, JobThatNeverFitsStopsInsteadOfHanging) {
  Case c;
  c.catalog.add(workload("huge", 50000, 0.5, 0.2, 100));
  c.add(0, 0, "huge");
  const auto r = c.run("aegis", 1, 40960);
  EXPECT_FALSE(r.jobs[0].completed);
  // It dies of OOM alone, may then only run on a larger GPU, and there is none.
  EXPECT_EQ(r.jobs[0].attempts.back().outcome, SimOutcome::Oom);
  // The one feasibility rule of aegis (lifecycle/placer.h), in the words of the API.
  EXPECT_EQ(r.jobs[0].stop_reason,
            "job.mem: after 2 out-of-memory failures it needs 40449 MiB per GPU (its recovery floor, more than it "
            "had); the largest GPU here offers 40448 MiB after the guard");
  EXPECT_EQ(summarize(r).stopped, 1);
}

}  // namespace
}  // namespace aegis

namespace aegis {
namespace {

TEST(Cluster, ParseAndDescribe) {
  const auto c = ClusterSpec::parse("2x8x40960,4x8x81920");
  EXPECT_EQ(c.servers.size(), 6u);
  EXPECT_EQ(c.total_gpus(), 48);
  EXPECT_EQ(c.servers[1].gpu_memory_mib, 40960);
  EXPECT_EQ(c.servers[2].gpu_memory_mib, 81920);
  EXPECT_EQ(c.describe(), "2 x 8 x 40960 MiB + 4 x 8 x 81920 MiB");
  for (const char* bad : {"", "8x40960", "2x8x", "2x0x40960", "2x8x40960x1", "axbxc", "2x8x40960,"})
    EXPECT_THROW(ClusterSpec::parse(bad), InputError) << bad;
  try {
    ClusterSpec::parse("2x8x40960,4x8");
    FAIL() << "expected InputError for '2x8x40960,4x8'";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--gpu-memory: '4x8' is not SERVERSxGPUSxMIB (e.g. 4x8x81920)");
  }
}

struct ClusterCase : Case {
  SimResult run_on(const std::string& policy, const ClusterSpec& c) {
    SimOptions o;
    o.policy_name = policy;
    o.engine = policy_config(policy);
    o.cluster = c;
    return simulate(catalog, trace, o);
  }
};

TEST(Cluster, JobsLargerThanAServerRunAloneAcrossWholeServers) {
  ClusterCase c;
  c.catalog.add(workload("one", 1000, 0.3, 0.1, 100));
  c.catalog.add(workload("wide", 10000, 0.8, 0.3, 200, 3));
  c.add(0, 0, "one");
  c.add(1, 1, "wide");  // 3 GPUs on 2-GPU servers: two whole idle servers
  c.add(2, 2, "one");
  const auto r = c.run_on("aegis", ClusterSpec::uniform(3, 2, 40960));
  const auto& wide = r.jobs[1].attempts.at(0);
  ASSERT_EQ(wide.gpus.size(), 3u);
  EXPECT_TRUE(wide.exclusive);
  // Job 0 holds server 0, so the wide job takes servers 1 and 2 (GPUs 2..4).
  EXPECT_EQ(wide.gpus, (std::vector<int>{2, 3, 4}));
  EXPECT_DOUBLE_EQ(r.jobs[1].first_launch, 1);
  // Strict FIFO: job 2 waits behind nothing (placed right away on the GPU left).
  EXPECT_TRUE(r.jobs[2].completed);
  for (const auto& j : r.jobs) EXPECT_TRUE(j.completed);
}

TEST(Cluster, DispatcherPrefersTheServerWithFewestIdleGpusThatSuffice) {
  ClusterCase c;
  c.catalog.add(workload("one", 1000, 0.3, 0.1, 1000));
  c.add(0, 0, "one");  // server 0 (both idle: lowest index)
  c.add(1, 1, "one");  // server 0 again: 1 idle GPU left there beats 2 on server 1
  c.add(2, 2, "one");  // server 1
  const auto r = c.run_on("exclusive", ClusterSpec::uniform(2, 2, 40960));
  EXPECT_EQ(r.jobs[0].attempts[0].gpus, std::vector<int>{0});
  EXPECT_EQ(r.jobs[1].attempts[0].gpus, std::vector<int>{1});
  EXPECT_EQ(r.jobs[2].attempts[0].gpus, std::vector<int>{2});
  EXPECT_EQ(r.gpu_server, (std::vector<int>{0, 0, 1, 1}));
}

TEST(Cluster, MixedGpuSizes) {
  ClusterCase c;
  c.catalog.add(workload("big", 60000, 0.5, 0.2, 100));
  c.add(0, 0, "big");
  const auto cluster = ClusterSpec::parse("1x1x40960,1x1x81920");
  // With its peak as the estimate it goes straight to the 80 GiB GPU.
  auto r = c.run_on("aegis-peak", cluster);
  EXPECT_TRUE(r.jobs[0].completed);
  EXPECT_EQ(r.jobs[0].attempts.size(), 1u);
  EXPECT_EQ(r.jobs[0].attempts[0].gpus, std::vector<int>{1});
  EXPECT_EQ(r.gpu_total_mib, (std::vector<MiB>{40960, 81920}));
}

TEST(Cluster, ClusterResultsEqualOneBigServerForSingleGpuExclusiveJobs) {
  ClusterCase c;
  c.catalog.add(workload("a", 1000, 0.3, 0.1, 500));
  c.catalog.add(workload("b", 2000, 0.5, 0.2, 900));
  for (int i = 0; i < 40; ++i) c.add(i, i * 20.0, i % 3 ? "a" : "b");
  const auto one = summarize(c.run_on("exclusive", ClusterSpec::uniform(1, 4, 40960)));
  const auto four = summarize(c.run_on("exclusive", ClusterSpec::uniform(4, 1, 40960)));
  EXPECT_DOUBLE_EQ(one.makespan_s, four.makespan_s);
  EXPECT_DOUBLE_EQ(one.queue_mean_s, four.queue_mean_s);
}

}  // namespace
}  // namespace aegis

namespace aegis {
namespace {

TEST(Sim, LateTimesWithCoarseClockResolutionStillFinish) {
  // At t = 1e12 s a double resolves about 0.1 ms: work smaller than that must not make
  // the simulator reschedule a completion at the same instant forever.
  Case c;
  c.catalog.add(workload("w", 1000, 0.9, 0.1, 100));
  for (int i = 0; i < 6; ++i) c.add(i, 1e12 + i * 0.37, "w");
  const auto r = c.run("naive", 1, 40960);
  for (const auto& j : r.jobs) EXPECT_TRUE(j.completed);
}

}  // namespace
}  // namespace aegis
