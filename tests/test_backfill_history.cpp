// Backfill with history-predicted durations (issue 32 item 5, src/lifecycle/backfill.h
// expected_end, estimate_chain.h predicted_duration): a job is expected to end at its time
// limit or, when shorter and not yet passed, at its signature's predicted duration.
#include <gtest/gtest.h>

#include <algorithm>

#include "lifecycle/backfill.h"
#include "lifecycle/estimate_chain.h"
#include "lifecycle/lifecycle.h"
#include "sim/sim_estimates.h"
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

// aegisd's restart (issue 32): the durations come back from the store's successful runs,
// given in any order: each signature keeps its last history_window by end, as if it had
// learnt them one by one, and what was learnt before is replaced.
TEST(EstimateChain, DurationsRebuiltFromPastRunsKeepTheLastWindowByEnd) {
  EstimateChainConfig c;
  c.history_window = 4;
  c.duration_min_runs = 3;
  c.duration_quantile = 0.9;
  EstimateChain learnt(c), rebuilt(c);
  // (signature, launch, end), ends out of order; "s" has six runs, "t" two.
  const std::vector<PastRun> past = {{"s", 1000, 1050}, {"s", 0, 100},   {"t", 0, 500},     {"s", 100, 400},
                                     {"s", 500, 700},   {"s", 800, 860}, {"s", 1100, 1170}, {"t", 600, 1000}};
  std::vector<PastRun> by_end = past;
  std::ranges::sort(by_end, {}, &PastRun::ended_at);
  for (const auto& r : by_end) learnt.completed_duration(r.signature, r.ended_at - r.launched_at);
  rebuilt.completed_duration("stale", 1);
  rebuilt.completed_duration("stale", 1);
  rebuilt.completed_duration("stale", 1);
  rebuilt.restore_durations(past);
  // The last four of "s" by end: 200 (ends 700), 60, 50, 70; 100 and 300 are older.
  EXPECT_EQ(rebuilt.predicted_duration("s"), 200);
  EXPECT_EQ(rebuilt.predicted_duration("s"), learnt.predicted_duration("s"));
  EXPECT_FALSE(rebuilt.predicted_duration("t"));      // two runs: too few
  EXPECT_FALSE(rebuilt.predicted_duration("stale"));  // replaced
  rebuilt.completed_duration("t", 450);               // learning goes on from there
  EXPECT_EQ(rebuilt.predicted_duration("t"), 500);
  c.duration_min_runs = 0;  // off: nothing is rebuilt
  EstimateChain off(c);
  off.restore_durations(past);
  EXPECT_FALSE(off.predicts_durations());
  EXPECT_FALSE(off.predicted_duration("s"));
}

// The simulator's signature has the trace's user, as aegisd's has the uid: one user's three
// runs of a workload predict that user's next job, not another user's; without a user
// column (owner -1) the runs are everyone's.
TEST(SimEstimates, OneUsersRunsDoNotPredictAnotherUsersDuration) {
  EngineConfig engine;
  engine.backfill = true;
  engine.backfill_history_runs = 3;
  WorkloadProfile w;
  w.name = "bert";
  w.peak_mib = 1000;
  auto predicted_after_runs = [&](std::int64_t runs_by, std::int64_t asked_by) {
    Lifecycle life(engine, LifecycleOptions{});
    GpuSlots gpus(1);
    SimEstimates estimates(engine);
    Seconds t = 0;
    for (JobId id = 1; id <= 3; ++id, t += 1000) {
      JobSpec spec = job(id, 1, std::nullopt, std::nullopt);
      spec.owner = runs_by;
      estimates.submitted(spec, w);
      life.submitted(std::move(spec), false, false, t);
      life.schedule(t, gpus);
      life.ended(id, {AttemptOutcome::Completed, ""}, t + 100 * static_cast<double>(id));
      gpus.release(id);
      estimates.completed(id, life, t + 100 * static_cast<double>(id));
    }
    JobSpec next = job(4, 1, std::nullopt, std::nullopt);
    next.owner = asked_by;
    estimates.submitted(next, w);
    return next.predicted_duration;
  };
  EXPECT_EQ(predicted_after_runs(0, 0), 300);  // runs of 100, 200 and 300 s
  EXPECT_FALSE(predicted_after_runs(0, 1));    // another user's: none
  EXPECT_FALSE(predicted_after_runs(1, 0));
  EXPECT_EQ(predicted_after_runs(-1, -1), 300);  // no user column: as before
}

}  // namespace
}  // namespace aegis
