// Arrays and dependencies in the simulator (issue 32 items 3-4): the trace's optional
// columns reach the lifecycle, which holds the elements until the probe's peak and gives
// them its true peak plus the margin; a dependency on an array waits for every element.
#include <gtest/gtest.h>

#include <algorithm>

#include "sched/policies.h"
#include "sim/simulator.h"

namespace aegis {
namespace {

struct SweepCase {
  WorkloadCatalog catalog;
  Trace trace;
  SweepCase() {
    WorkloadProfile w;
    w.name = "w";
    w.num_gpus = 1;
    w.peak_mib = 10000;
    w.smact = 0.2;
    w.smocc = 0.1;
    w.drama = 0.1;
    w.util = 0.2;
    w.solo_runtime_s = 600;
    catalog.add(w);
    trace.path = "test";
    for (int i = 0; i < 5; ++i) {
      TraceJob j;
      j.index = i;
      j.workload = "w";
      j.line = static_cast<std::uint32_t>(i) + 2;
      trace.jobs.push_back(j);
    }
  }
  void link() {
    for (int i = 0; i < 4; ++i) {
      trace.links[i].array = 0;
      trace.links[i].array_index = i;
    }
    trace.links[4].after = {{0, "ok"}};  // the array's id: all four
  }
  SimResult run() {
    SimOptions o;
    o.policy_name = "aegis";
    o.engine = policy_config("aegis");
    o.cluster = ClusterSpec::uniform(1, 4, 40960);
    return simulate(catalog, trace, o);
  }
};

TEST(SimLinks, ElementsWaitForTheProbesPeakAndGetItPlusTheMargin) {
  SweepCase c;
  c.link();
  const auto r = c.run();
  ASSERT_EQ(r.jobs.size(), 5u);
  const auto& probe = r.jobs[0].attempts.front();
  ASSERT_GE(probe.first_activity, 0);
  const EngineConfig e = policy_config("aegis");
  for (int i = 1; i < 4; ++i) {
    EXPECT_TRUE(r.jobs[i].completed);
    EXPECT_GE(r.jobs[i].first_launch, probe.first_activity + e.array_probe_settle_s) << i;
    EXPECT_EQ(r.jobs[i].attempts.front().floor_mib, 10000 + e.memory_margin_mib) << i;
  }
  Seconds last_end = 0;
  for (int i = 0; i < 4; ++i) last_end = std::max(last_end, r.jobs[i].end);
  EXPECT_GE(r.jobs[4].first_launch, last_end);
}

TEST(SimLinks, ElementsStartWhenTheProbePeaksNotAtTheNextEvent) {
  // Nothing arrives or ends between the probe's first activity and its peak: the elements
  // must still start then (GPUs are idle), not when the probe completes 600 s later.
  SweepCase c;
  c.link();
  const auto r = c.run();
  const auto& probe = r.jobs[0].attempts.front();
  ASSERT_GE(probe.first_activity, 0);
  const Seconds peak = probe.first_activity + policy_config("aegis").array_probe_settle_s;
  ASSERT_LT(peak, r.jobs[0].end);
  for (int i = 1; i < 4; ++i) EXPECT_DOUBLE_EQ(r.jobs[i].first_launch, peak) << i;
}

TEST(SimLinks, WithoutTheColumnsTheSameJobsRunUnlinked) {
  SweepCase c;
  const auto r = c.run();
  // Idle GPUs go to the head alone: all five start at once, on four GPUs and then the fifth
  // next to one; none waits for a probe.
  EXPECT_EQ(r.jobs[1].first_launch, 0);
  EXPECT_EQ(r.jobs[1].attempts.front().floor_mib, 0);
}

}  // namespace
}  // namespace aegis
