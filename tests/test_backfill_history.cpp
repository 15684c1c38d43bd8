// Backfill with history-predicted durations (issue 32 item 5, src/lifecycle/backfill.h
// expected_end, estimate_chain.h predicted_duration): a job is expected to end at its time
// limit or, when shorter and not yet passed, at its signature's predicted duration.
#include <gtest/gtest.h>

#include "lifecycle/backfill.h"
#include "lifecycle/estimate_chain.h"
#include "lifecycle/lifecycle.h"
#include "tests/gpu_slots.h"

namespace aegis {
namespace {

using test::GpuSlots;

JobSpec job(JobId id, int gpus, std::optional<Seconds> limit, std::optional<Seconds> predicted) {
  JobSpec s;
  s.id = id;
  s.num_gpus = gpus;
  s.time_limit = limit;
  s.predicted_duration = predicted;
  return s;
}

Lifecycle with_backfill() {
  EngineConfig c;
  c.backfill = true;
  return Lifecycle(c, LifecycleOptions{});
}

TEST(ExpectedEnd, TheLimitOrAnEarlierPredictionUntilItHasPassed) {
  EXPECT_EQ(expected_end(job(1, 1, 3600, 600), 100, 200), 700);     // the prediction, shorter
  EXPECT_EQ(expected_end(job(1, 1, 3600, 600), 100, 800), 3700);    // outrun: its limit again
  EXPECT_EQ(expected_end(job(1, 1, 3600, 9000), 100, 200), 3700);   // capped by the limit
  EXPECT_EQ(expected_end(job(1, 1, std::nullopt, 600), 100, 200), 700);  // no limit: the prediction
  EXPECT_FALSE(expected_end(job(1, 1, std::nullopt, 600), 100, 800));    // outrun, no limit: runs on
  EXPECT_FALSE(expected_end(job(1, 1, std::nullopt, std::nullopt), 100, 200));
  EXPECT_TRUE(may_backfill(job(1, 1, std::nullopt, 600), 0, 600));
  EXPECT_FALSE(may_backfill(job(1, 1, 7200, 601), 0, 600));
}

// Three GPUs: A (1 GPU, limit 3600) runs; the head H wants all three. E has no limit but a
// prediction of 30 min, so it ends before H's reservation: it starts. D's prediction ends
// after it: it waits. (Before predictions only a limit counted: E waited.)
TEST(Backfill, AJobWithoutALimitBackfillsByItsPredictedDuration) {
  auto life = with_backfill();
  GpuSlots gpus(3);
  life.submitted(job(1, 1, 3600, std::nullopt), false, false, 0);
  life.schedule(0, gpus);
  life.submitted(job(2, 3, 7200, std::nullopt), false, false, 1);  // H
  life.submitted(job(3, 1, std::nullopt, 5000), false, false, 2);  // D
  life.submitted(job(4, 1, std::nullopt, 1800), false, false, 3);  // E
  const Effects fx = life.schedule(10, gpus);
  ASSERT_EQ(fx.starts.size(), 1u);
  EXPECT_EQ(fx.starts[0].job, 4);
  EXPECT_EQ(fx.reserved_start, 3600);
}

// A running job's prediction brings the head's reservation forward; once the job outruns
// it, the reservation falls back to its limit (the head's start slips: only the limit stops a job).
TEST(Backfill, ARunningJobsPredictionCountsUntilItIsOutrun) {
  auto life = with_backfill();
  GpuSlots gpus(2);
  life.submitted(job(1, 1, 3600, 600), false, false, 0);  // A: predicted 600 s, limit 3600 s
  life.schedule(0, gpus);
  life.submitted(job(2, 2, 7200, std::nullopt), false, false, 1);  // H: both GPUs
  life.submitted(job(3, 1, 1800, std::nullopt), false, false, 2);  // C: 30 min
  Effects fx = life.schedule(10, gpus);
  EXPECT_EQ(fx.reserved_start, 600);
  EXPECT_TRUE(fx.starts.empty());  // C would end after 600 on a GPU H needs
  fx = life.schedule(700, gpus);   // A outran its prediction
  EXPECT_EQ(fx.reserved_start, 3600);
  ASSERT_EQ(fx.starts.size(), 1u);  // C ends by 2500 now: it starts
  EXPECT_EQ(fx.starts[0].job, 3);
}

TEST(EstimateChain, PredictedDurationIsTheQuantileOfTheLastRunsOnceThereAreEnough) {
  EstimateChainConfig c;
  c.history_window = 4;
  c.duration_min_runs = 3;
  c.duration_quantile = 0.9;
  EstimateChain chain(c);
  chain.completed_duration("s", 100);
  chain.completed_duration("s", 300);
  EXPECT_FALSE(chain.predicted_duration("s"));  // two runs: too few
  chain.completed_duration("s", 200);
  EXPECT_EQ(chain.predicted_duration("s"), 300);  // nearest rank, rounding up
  for (Seconds d : {50, 60, 70}) chain.completed_duration("s", d);  // the window (4) drops 100 and 300
  EXPECT_EQ(chain.predicted_duration("s"), 200);
  EXPECT_FALSE(chain.predicted_duration("other"));
  c.duration_min_runs = 0;  // off: nothing is learnt
  EstimateChain off(c);
  for (int i = 0; i < 5; ++i) off.completed_duration("s", 100);
  EXPECT_FALSE(off.predicted_duration("s"));
}

}  // namespace
}  // namespace aegis
