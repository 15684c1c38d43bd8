// OOM recovery: the published ladder on a 40 GiB GPU, and CARMA's retry rule.
#include <gtest/gtest.h>

#include "sched/recovery/recovery.h"

namespace aegis {
namespace {

RunningJob failed(MiB free_at_placement, RecoveryState r = {}, bool exclusive = false) {
  RunningJob j;
  j.spec.id = 7;
  j.recovery = r;
  j.free_at_placement = free_at_placement;
  j.gpu_total_mib = 40960;
  j.exclusive = exclusive;
  return j;
}

TEST(Ladder, RungsOn40GiB) {
  EXPECT_EQ(ladder_rungs(40960, {0.25, 0.5, 0.75}, 8192),
            (std::vector<MiB>{10240, 18432, 20480, 28672, 30720}));
}

TEST(Ladder, RungsOn80GiBAndWithoutExtraSteps) {
  EXPECT_EQ(ladder_rungs(81920, {0.25, 0.5, 0.75}, 8192),
            (std::vector<MiB>{20480, 28672, 36864, 40960, 49152, 57344, 61440}));
  EXPECT_EQ(ladder_rungs(40960, {0.25, 0.5, 0.75}, 1 << 20), (std::vector<MiB>{10240, 20480, 30720}));
}

TEST(Ladder, ClimbsThenRunsAloneThenStops) {
  const EngineConfig c;
  auto rule = make_ladder_recovery(c);
  RecoveryState r;
  // Each failure happened with a little more free memory than the floor it was given.
  const MiB free_when_failed[] = {6000, 10240, 18432, 20480, 28672, 30720};
  const MiB expected[] = {10240, 18432, 20480, 28672, 30720};
  for (int step = 0; step < 5; ++step) {
    auto out = rule->after_oom(failed(free_when_failed[step], r), true);
    ASSERT_TRUE(std::holds_alternative<Requeue>(out)) << step;
    r = std::get<Requeue>(out).recovery;
    EXPECT_EQ(r.floor_mib, expected[step]) << step;
    EXPECT_FALSE(r.exclusive_only);
    EXPECT_EQ(r.oom_count, step + 1);
  }
  auto top = rule->after_oom(failed(30720, r), true);
  ASSERT_TRUE(std::holds_alternative<Requeue>(top));
  EXPECT_TRUE(std::get<Requeue>(top).recovery.exclusive_only);
  // An OOM alone: only a larger GPU may take it now (on 40 GiB GPUs the engine stops it).
  auto alone = rule->after_oom(failed(40448, std::get<Requeue>(top).recovery, /*exclusive=*/true), true);
  ASSERT_TRUE(std::holds_alternative<Requeue>(alone));
  EXPECT_EQ(std::get<Requeue>(alone).recovery.floor_mib, 40449);
  EXPECT_TRUE(std::get<Requeue>(alone).recovery.exclusive_only);
}

TEST(Ladder, SkipsRungsBelowTheFreeMemoryTheJobHad) {
  auto rule = make_ladder_recovery(EngineConfig{});
  auto out = rule->after_oom(failed(19000), true);
  EXPECT_EQ(std::get<Requeue>(out).recovery.floor_mib, 20480);
  // The floor it already had counts too.
  auto out2 = rule->after_oom(failed(9000, RecoveryState{28672, false, 1}), true);
  EXPECT_EQ(std::get<Requeue>(out2).recovery.floor_mib, 30720);
}

TEST(Retry, OneRetryThenAloneThenStop) {
  EngineConfig c;
  c.recovery = "retry";
  c.retries_before_exclusive = 1;
  auto rule = make_recovery(c);
  auto first = rule->after_oom(failed(12000), true);
  ASSERT_TRUE(std::holds_alternative<Requeue>(first));
  EXPECT_FALSE(std::get<Requeue>(first).recovery.exclusive_only);
  auto second = rule->after_oom(failed(12000, std::get<Requeue>(first).recovery), true);
  EXPECT_TRUE(std::get<Requeue>(second).recovery.exclusive_only);
  auto third = rule->after_oom(failed(40448, std::get<Requeue>(second).recovery, true), true);
  EXPECT_EQ(std::get<Requeue>(third).recovery.floor_mib, 40449);
}

// Unexplained (the simulator's way): the same new recovery state, no words.
TEST(Recovery, UnexplainedGivesTheSameStateWithoutItsWords) {
  for (const char* rule_name : {"ladder", "retry"}) {
    EngineConfig c;
    c.recovery = rule_name;
    auto rule = make_recovery(c);
    for (const RunningJob& job : {failed(9000), failed(19000, RecoveryState{20480, false, 1}), failed(30720),
                                  failed(40448, RecoveryState{30720, true, 2}, true)}) {
      auto told = rule->after_oom(job, true), quiet = rule->after_oom(job, false);
      ASSERT_EQ(told.index(), quiet.index()) << rule_name;
      if (auto* r = std::get_if<Requeue>(&told)) {
        const Requeue& q = std::get<Requeue>(quiet);
        EXPECT_EQ(q.recovery.floor_mib, r->recovery.floor_mib) << rule_name;
        EXPECT_EQ(q.recovery.exclusive_only, r->recovery.exclusive_only) << rule_name;
        EXPECT_EQ(q.recovery.oom_count, r->recovery.oom_count) << rule_name;
        EXPECT_FALSE(r->why.empty()) << rule_name;
        EXPECT_TRUE(q.why.empty()) << rule_name;
      }
    }
  }
}

}  // namespace
}  // namespace aegis
