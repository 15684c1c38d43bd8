// Preemption in the simulator (issue 32 item 1): the trace's `priority` column reaches the
// lifecycle, which warns and stops the running job that loses least; the simulator only
// applies its effects (the checkpoint model of sim.checkpoint_*, docs/lab-policies.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <fmt/format.h>

#include "sched/policies.h"
#include "sim/csv.h"
#include "sim/json_report.h"
#include "sim/metrics.h"
#include "sim/simulator.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

// Two GPUs, both busy with level-0 jobs (0 from t=0, 1 from t=350, 1000 s each) when a
// level-5 job of 200 s arrives at t=620.
struct FullCluster {
  WorkloadCatalog catalog;
  Trace trace;
  SimOptions o;
  FullCluster() : catalog(test::one_workload_catalog()) {
    trace.path = "test";
    const Seconds submit[] = {0, 350, 620}, work[] = {1000, 1000, 200};
    const int level[] = {0, 0, 5};
    for (int i = 0; i < 3; ++i) {
      TraceJob j;
      j.index = i;
      j.workload = "w";
      j.submit_time = submit[i];
      j.duration_s = work[i];
      j.priority = static_cast<std::int16_t>(level[i]);
      j.line = static_cast<std::uint32_t>(i) + 2;
      trace.jobs.push_back(j);
    }
    o.policy_name = "exclusive";
    o.engine = policy_config("exclusive");
    o.engine.preempt_exempt_s = 0;  // the rule alone (job 1 is 270 s old at t=620)
    o.cluster = ClusterSpec::uniform(1, 2, 40960);
  }
  SimResult run() { return simulate(catalog, trace, o); }
};

// Checkpoints every 300 s; warned jobs cannot save within the 120 s lead (save 1000 s).
// At t=620 job 0 saved at t=600 (20 s at risk), job 1 has none (270 s): job 0, the earlier
// job, loses least. It is stopped at the lead's end (t=740) having lost 140 s since its
// checkpoint, job 2 starts then, and job 0 resumes at job 2's end with its 400 s left.
TEST(SimPreemption, AHigherLevelStopsTheJobThatLosesLeastWhichResumesAndRedoesItsLostWork) {
  FullCluster c;
  c.o.sim.preemption = true;
  c.o.sim.checkpoint_interval_s = 300;
  c.o.sim.checkpoint_lead_s = 120;
  c.o.sim.checkpoint_save_s = 1000;
  const SimResult r = c.run();
  ASSERT_EQ(r.jobs.size(), 3u);
  for (const auto& j : r.jobs) EXPECT_TRUE(j.completed) << j.trace_index;
  EXPECT_EQ(r.lab.preemptions, 1);
  EXPECT_NEAR(r.lab.work_lost_gpu_s, 140, 1e-6);
  const JobRecord& victim = r.jobs[0];
  ASSERT_EQ(victim.attempts.size(), 2u);
  EXPECT_EQ(victim.attempts[0].outcome, SimOutcome::Preempted);
  EXPECT_NEAR(victim.attempts[0].end, 740, 1e-6);
  EXPECT_NEAR(r.jobs[2].first_launch, 740, 1e-6);
  EXPECT_NEAR(victim.attempts[1].launch, 940, 1e-6);
  EXPECT_NEAR(victim.end, 940 + 400, 1e-6);  // 1000 s of work less the 600 saved
  EXPECT_EQ(r.jobs[1].attempts.size(), 1u);   // spared
  const RunMetrics m = summarize(r);
  EXPECT_EQ(m.failed_attempts, 0);  // a preempted attempt is no failure
  const Json j = to_json(m);
  EXPECT_EQ(j.at("preemptions"), 1);
  EXPECT_NEAR(j.at("work_lost_gpu_s").get<double>(), 140, 1e-6);
}

// A warned job that saves within its lead (30 s of 120) is stopped as it saves: nothing lost.
TEST(SimPreemption, AJobThatSavesWhenWarnedIsStoppedThenAndLosesNothing) {
  FullCluster c;
  c.o.sim.preemption = true;
  const SimResult r = c.run();
  EXPECT_EQ(r.lab.preemptions, 1);
  EXPECT_EQ(r.lab.work_lost_gpu_s, 0);
  // No periodic checkpoints: job 1 (270 s at risk) loses less than job 0 (620 s).
  ASSERT_EQ(r.jobs[1].attempts.size(), 2u);
  EXPECT_NEAR(r.jobs[1].attempts[0].end, 650, 1e-6);
  EXPECT_NEAR(r.jobs[2].first_launch, 650, 1e-6);
  // It saved its 300 s of work at t=650 and resumes when job 2 ends (t=850) with 700 s left.
  EXPECT_NEAR(r.jobs[1].attempts[1].launch, 850, 1e-6);
  EXPECT_NEAR(r.jobs[1].end, 850 + 700, 1e-6);
}

// The exemption (preempt_exempt_s, an engine parameter both drivers read; 600 s by
// default): at t=620 job 1's attempt is 270 s old and spared, though it has less at risk;
// job 0 (620 s) is stopped as it saves at t=650 and resumes at job 2's end with 350 s left.
TEST(SimPreemption, AnAttemptYoungerThanTheExemptTimeIsSparedByDefault) {
  FullCluster c;
  c.o.engine = policy_config("exclusive");  // the default exemption
  c.o.sim.preemption = true;
  const SimResult r = c.run();
  EXPECT_EQ(r.lab.preemptions, 1);
  ASSERT_EQ(r.jobs[0].attempts.size(), 2u);
  EXPECT_EQ(r.jobs[0].attempts[0].outcome, SimOutcome::Preempted);
  EXPECT_NEAR(r.jobs[0].attempts[0].end, 650, 1e-6);
  EXPECT_NEAR(r.jobs[2].first_launch, 650, 1e-6);
  EXPECT_NEAR(r.jobs[0].end, 850 + 350, 1e-6);
  EXPECT_EQ(r.jobs[1].attempts.size(), 1u) << "job 1's attempt was 270 s old: exempt";
}

// Off (the default), a trace's levels only order the queue: the level-5 job waits for a GPU.
TEST(SimPreemption, OffNothingIsStopped) {
  FullCluster c;
  const SimResult r = c.run();
  EXPECT_EQ(r.lab.preemptions, 0);
  for (const auto& j : r.jobs) EXPECT_EQ(j.attempts.size(), 1u);
  EXPECT_NEAR(r.jobs[2].first_launch, 1000, 1e-6);
  EXPECT_FALSE(to_json(summarize(r)).contains("preemptions"));
}

// The `priority` column: a level per job, empty is 0; a bad value names the column.
TEST(SimPreemption, PriorityColumnIsReadAndBadValuesNameIt) {
  FullCluster c;
  const std::string path = ::testing::TempDir() + "/trace_priority.csv";
  auto write = [&](const std::string& rows) {
    std::ofstream f(path);
    f << "job_index,submit_time_s,workload_name,num_gpus,priority\n" << rows;
  };
  write("0,0,w,1,5\n1,1,w,1,\n2,2,w,1,-3\n");
  const Trace t = load_aegis_trace(path, c.catalog);
  ASSERT_EQ(t.jobs.size(), 3u);
  EXPECT_EQ(t.jobs[0].priority, 5);
  EXPECT_EQ(t.jobs[1].priority, 0);
  EXPECT_EQ(t.jobs[2].priority, -3);
  for (const char* bad : {"high", "2.5", "5000"}) {
    write(std::string("0,0,w,1,0\n1,1,w,1,") + bad + "\n");
    try {
      load_aegis_trace(path, c.catalog);
      ADD_FAILURE() << "read priority " << bad;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("priority"), std::string::npos) << what;
      EXPECT_NE(what.find(":3"), std::string::npos) << what;  // the row's line
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  std::remove(path.c_str());
}

// Philly's format takes the same optional column (a study's derived levels).
TEST(SimPreemption, PhillyTracesTakeThePriorityColumnToo) {
  FullCluster c;
  const std::string path = ::testing::TempDir() + "/philly_priority.csv";
  auto write = [&](const std::string& rows) {
    std::ofstream f(path);
    f << "timestamp,duration,num_gpus,priority\n" << rows;
  };
  write("2017-10-03 00:00:00,100,1,1\n2017-10-03 00:00:05,100,1,\n");
  const Trace t = load_trace(path, c.catalog);
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].priority, 1);
  EXPECT_EQ(t.jobs[1].priority, 0);
  write("2017-10-03 00:00:00,100,1,1\n2017-10-03 00:00:05,100,1,2000\n");
  try {
    load_trace(path, c.catalog);
    ADD_FAILURE() << "read priority 2000";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("priority"), std::string::npos) << what;
    EXPECT_NE(what.find(":3"), std::string::npos) << what;
  }
  std::remove(path.c_str());
}

// Jobs larger than one server (issue 32): 8-GPU servers under `exclusive`, every job a
// 1-GPU or 16-GPU one of level 0 or 1, checkpoints saved when warned (30 s).
struct GangCluster {
  WorkloadCatalog catalog;
  Trace trace;
  SimOptions o;
  explicit GangCluster(int servers) {
    for (int gpus : {1, 16}) {
      WorkloadProfile w;
      w.name = fmt::format("w{}", gpus);
      w.num_gpus = gpus;
      w.peak_mib = 10000;
      w.smact = w.util = 0.2;
      w.smocc = w.drama = 0.1;
      w.solo_runtime_s = 1000;
      catalog.add(w);
    }
    trace.path = "test";
    o.policy_name = "exclusive";
    o.engine = policy_config("exclusive");
    o.engine.preempt_exempt_s = 0;
    o.cluster = ClusterSpec::uniform(servers, 8, 40960);
    o.sim.preemption = true;
  }
  void add(Seconds submit, int gpus, int level, Seconds work) {
    TraceJob j;
    j.index = static_cast<std::int64_t>(trace.jobs.size());
    j.workload = fmt::format("w{}", gpus);
    j.num_gpus = static_cast<std::int16_t>(gpus);
    j.submit_time = submit;
    j.duration_s = work;
    j.priority = static_cast<std::int16_t>(level);
    j.line = static_cast<std::uint32_t>(trace.jobs.size()) + 2;
    trace.jobs.push_back(j);
  }
  SimResult run() { return simulate(catalog, trace, o); }
};

std::set<int> servers_of(const AttemptRecord& a) {
  std::set<int> s;
  for (int g : a.gpus) s.insert(g / 8);
  return s;
}

// Three full servers: jobs 0-7 on server 0 from t=0, 8-15 on server 1 from t=100, 16-23 on
// server 2 from t=200. A level-1 16-GPU job at t=1000 needs two whole servers: the rule
// takes the jobs with least work at risk first (the youngest: servers 2, then 1) and stops
// exactly those 16; server 0's older jobs run on, and the gang job starts on servers 1-2
// as their jobs save their checkpoints (t=1030).
TEST(SimPreemption, AGangJobEmptiesTheWholeServersWhoseJobsLoseLeast) {
  GangCluster c(3);
  for (int i = 0; i < 24; ++i) c.add(100.0 * (i / 8) + i % 8, 1, 0, 5000);
  c.add(1000, 16, 1, 500);
  const SimResult r = c.run();
  ASSERT_EQ(r.jobs.size(), 25u);
  for (const auto& j : r.jobs) EXPECT_TRUE(j.completed) << j.trace_index;
  EXPECT_EQ(r.lab.preemptions, 16);
  for (int i = 0; i < 24; ++i) {
    const JobRecord& j = r.jobs[static_cast<std::size_t>(i)];
    EXPECT_EQ(*servers_of(j.attempts[0]).begin(), i / 8) << "job " << i << " placed as the test assumes";
    if (i < 8) {
      EXPECT_EQ(j.attempts.size(), 1u) << "job " << i << " on server 0 has most at risk: spared";
    } else {
      ASSERT_EQ(j.attempts.size(), 2u) << "job " << i;
      EXPECT_EQ(j.attempts[0].outcome, SimOutcome::Preempted) << "job " << i;
    }
  }
  const JobRecord& gang = r.jobs[24];
  EXPECT_NEAR(gang.first_launch, 1030, 1.0);
  EXPECT_EQ(servers_of(gang.attempts[0]), (std::set<int>{1, 2}));
}

// A victim on several servers frees all of its parts: a level-0 16-GPU job on servers 2-3
// (from t=100: 16 x 900 = 14,400 GPU-s at risk) loses less than the sixteen 1-GPU jobs
// filling servers 0-1 (from t=0-15: 15,880 GPU-s together), so it alone is stopped for
// the level-1 gang job.
TEST(SimPreemption, AGangVictimFreesEveryServerItSpans) {
  GangCluster c(4);
  for (int i = 0; i < 16; ++i) c.add(i, 1, 0, 5000);
  c.add(100, 16, 0, 5000);
  c.add(1000, 16, 1, 500);
  const SimResult r = c.run();
  ASSERT_EQ(r.jobs.size(), 18u);
  EXPECT_EQ(r.lab.preemptions, 1);
  EXPECT_EQ(servers_of(r.jobs[16].attempts[0]), (std::set<int>{2, 3}));
  ASSERT_EQ(r.jobs[16].attempts.size(), 2u);
  EXPECT_EQ(r.jobs[16].attempts[0].outcome, SimOutcome::Preempted);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(r.jobs[static_cast<std::size_t>(i)].attempts.size(), 1u) << "job " << i;
  EXPECT_NEAR(r.jobs[17].first_launch, 1030, 1.0);
  EXPECT_EQ(servers_of(r.jobs[17].attempts[0]), (std::set<int>{2, 3}));
}

// Nobody is stopped when even every candidate would not make room: a level-1 job holds a
// GPU of each of the two servers, so no server can be emptied for the level-1 gang job,
// which waits for every job to end.
TEST(SimPreemption, NobodyIsStoppedForAGangJobThatEvenAllCandidatesCannotMakeRoomFor) {
  GangCluster c(2);
  for (int i = 0; i < 16; ++i) c.add(i, 1, i % 8 == 7 ? 1 : 0, i % 8 == 7 ? 3000 : 2000);
  c.add(1000, 16, 1, 500);
  const SimResult r = c.run();
  ASSERT_EQ(r.jobs.size(), 17u);
  EXPECT_EQ(r.lab.preemptions, 0);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(r.jobs[static_cast<std::size_t>(i)].attempts.size(), 1u) << "job " << i;
  EXPECT_GE(r.jobs[16].first_launch, 3000);
}

}  // namespace
}  // namespace aegis
