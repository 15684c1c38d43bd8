// Arrays that learn from their first element and dependencies (issue 32 items 3-4,
// src/lifecycle/holds.h), through the Lifecycle with a placer that places what it is let.
#include <gtest/gtest.h>

#include <set>

#include "lifecycle/lifecycle.h"

namespace aegis {
namespace {

// Places every job on GPU 0 unless told not to; a job whose floor is above `largest` can
// never run here (as the feasibility rule says of a floor no GPU offers).
class Placer1 : public Placer {
 public:
  std::set<JobId> refused;
  MiB largest = 1 << 20;
  std::vector<JobId> asked;
  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    asked.push_back(job.spec.id);
    if (refused.count(job.spec.id)) return std::nullopt;
    Launch l;
    l.job = job.spec.id;
    l.gpus = {0};
    l.admitted_mib = std::max<MiB>(job.recovery.floor_mib, 1000);
    Placement p;
    p.parts.push_back({0, l, 40960});
    return p;
  }
  void started(const QueuedJob&, const Placement&, Seconds) override {}
  std::optional<std::string> never_runs(const QueuedJob& job) const override {
    if (job.recovery.floor_mib > largest) return std::string("job.mem: too much");
    return std::nullopt;
  }
  std::variant<Requeue, Stop> recover(const Failure& f) const override {
    if (f.kind != FailureKind::Oom) return Stop{f.job.spec.id, "failed: " + f.detail};
    RecoveryState r = f.job.recovery;
    r.oom_count++;
    r.floor_mib = 30000;
    return Requeue{f.job.spec.id, r, "after OOM"};
  }
};

EngineConfig config() {
  EngineConfig c;
  c.array_probe_settle_s = 60;
  c.memory_margin_mib = 2048;
  return c;
}

JobSpec element(JobId array, int index) {
  JobSpec s;
  s.id = array + index;
  s.array_id = array;
  s.array_index = index;
  return s;
}

JobSpec plain(JobId id) {
  JobSpec s;
  s.id = id;
  return s;
}

// An array of n elements (ids array .. array+n-1), then nothing else.
void submit_array(Lifecycle& life, JobId array, int n, int limit = 0) {
  for (int i = 0; i < n; ++i) life.submitted(element(array, i), false, false, 0, JobLinks{{}, limit});
}

std::set<JobId> started(const Effects& fx) {
  std::set<JobId> s;
  for (const auto& st : fx.starts) s.insert(st.job);
  return s;
}

TEST(Holds, ArrayProbeRunsFirstAndHeldElementsBlockNothingBehind) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 3);
  life.submitted(plain(20), false, false, 0);
  Placer1 p;
  auto fx = life.schedule(1, p);
  // Strict head-of-line, yet the job behind the held elements starts: held is not blocked.
  EXPECT_EQ(started(fx), (std::set<JobId>{10, 20}));
  EXPECT_EQ(p.asked, (std::vector<JobId>{10, 20}));  // the held ones are not even asked
  EXPECT_NE(life.find(11)->reason.find("waiting for its probe, job 10"), std::string::npos) << life.find(11)->reason;
  EXPECT_EQ(life.find(12)->state, JobState::Queued);
}

TEST(Holds, ProbePeakAfterTheSettleWindowGivesTheElementsItsPeakPlusMargin) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 3);
  Placer1 p;
  life.schedule(1, p);
  life.first_activity(10, 5);
  life.memory_seen(10, 8000, 5);
  life.memory_seen(10, 9000, 10);   // grew
  life.memory_seen(10, 9030, 40);   // within the tolerance (64 MiB): not growth
  auto fx = life.schedule(60, p);
  EXPECT_TRUE(fx.starts.empty());
  ASSERT_TRUE(fx.wake_at);
  EXPECT_EQ(*fx.wake_at, 70);  // last growth at 10, plus the 60 s window
  fx = life.schedule(70, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{11, 12}));
  EXPECT_EQ(life.find(11)->queued.recovery.floor_mib, 9030 + 2048);
  int estimates = 0;
  for (const auto& c : fx.changes) estimates += c.event == "estimate";
  EXPECT_EQ(estimates, 2);
}

TEST(Holds, MemorySeenTellsWhenTheProbesPeakWillBeReached) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 3);
  life.submitted(plain(20), false, false, 0);
  Placer1 p;
  life.schedule(1, p);
  EXPECT_FALSE(life.memory_seen(20, 5000, 4));  // no array: nothing to wait for
  life.first_activity(10, 5);
  EXPECT_EQ(life.memory_seen(10, 8000, 5), 65);  // first activity plus the 60 s window
  EXPECT_EQ(life.memory_seen(10, 9000, 10), 70);  // grew: its window starts again
  EXPECT_EQ(life.memory_seen(10, 9030, 40), 70);  // within the tolerance: not growth
  EXPECT_EQ(started(life.schedule(70, p)), (std::set<JobId>{11, 12}));
  EXPECT_FALSE(life.memory_seen(10, 9030, 80));  // settled: no more wakes
}

TEST(Holds, ProbeThatCompletesReleasesTheElementsWithItsPeakOrWithoutOne) {
  for (bool readings : {true, false}) {
    Lifecycle life(config(), {});
    submit_array(life, 10, 2);
    Placer1 p;
    life.schedule(1, p);
    if (readings) life.memory_seen(10, 5000, 3);
    life.ended(10, {AttemptOutcome::Completed, ""}, 20);
    auto fx = life.schedule(20, p);
    EXPECT_EQ(started(fx), (std::set<JobId>{11}));
    EXPECT_EQ(life.find(11)->queued.recovery.floor_mib, readings ? 5000 + 2048 : 0);
  }
}

TEST(Holds, AProbeThatFailsPassesThePartToTheNextElement) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 3);
  Placer1 p;
  life.schedule(1, p);
  life.ended(10, {AttemptOutcome::Failed, "exit 1"}, 5);
  auto fx = life.schedule(5, p);
  EXPECT_EQ(life.find(10)->state, JobState::Failed);
  EXPECT_EQ(started(fx), (std::set<JobId>{11}));  // the next probe, alone
  EXPECT_NE(life.find(12)->reason.find("job 11"), std::string::npos) << life.find(12)->reason;
}

TEST(Holds, AProbeOutOfMemoryStaysTheProbeAndStartsItsReadingsAgain) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 2);
  Placer1 p;
  life.schedule(1, p);
  life.first_activity(10, 2);
  life.memory_seen(10, 40000, 2);
  life.ended(10, {AttemptOutcome::Oom, "CUDA out of memory"}, 5);
  auto fx = life.schedule(100, p);  // requeued by the ladder and started again
  EXPECT_EQ(started(fx), (std::set<JobId>{10}));
  EXPECT_EQ(life.find(11)->state, JobState::Queued);
  // The new attempt's readings only: 41000 at 101, steady, peak at 161.
  life.first_activity(10, 101);
  life.memory_seen(10, 41000, 101);
  EXPECT_TRUE(life.schedule(160, p).starts.empty());
  fx = life.schedule(161, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{11}));
  EXPECT_EQ(life.find(11)->queued.recovery.floor_mib, 41000 + 2048);
}

// The probe fitted a GPU but its peak plus the margin does not: the element gets a GPU of its
// own (exclusive_only) instead of the estimator-free floor, where it would share and die.
TEST(Holds, ALearnedFloorNoGpuOffersSendsTheElementAloneOnAnIdleGpu) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 2);
  Placer1 p;
  p.largest = 40000;
  life.schedule(1, p);
  life.memory_seen(10, 39000, 3);  // + margin is more than any GPU here offers
  life.ended(10, {AttemptOutcome::Completed, ""}, 20);
  auto fx = life.schedule(20, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{11}));
  EXPECT_EQ(life.find(11)->state, JobState::Running);
  EXPECT_EQ(life.find(11)->queued.recovery.floor_mib, 0);
  EXPECT_TRUE(life.find(11)->queued.recovery.exclusive_only);
}

// Sent alone, it waits for an idle GPU as it waited for its floor: passed over while a
// sibling runs (whose end frees one), the head once none does.
TEST(Holds, AnElementSentAloneIsPassedOverWhileASiblingRuns) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 3);
  Placer1 p;
  p.largest = 40000;
  life.schedule(1, p);
  life.first_activity(10, 2);
  life.memory_seen(10, 39000, 2);
  p.refused = {11, 12};  // no idle GPU yet
  life.submitted(plain(20), false, false, 0);
  auto fx = life.schedule(62, p);  // the probe peaked and still runs
  EXPECT_TRUE(life.find(11)->queued.recovery.exclusive_only);
  EXPECT_EQ(started(fx), (std::set<JobId>{20}));
  EXPECT_NE(life.find(11)->reason.find("needs an idle GPU"), std::string::npos) << life.find(11)->reason;
  life.ended(10, {AttemptOutcome::Completed, ""}, 100);
  life.submitted(plain(21), false, false, 0);
  p.asked.clear();
  fx = life.schedule(100, p);
  EXPECT_TRUE(started(fx).empty());
  EXPECT_EQ(p.asked, (std::vector<JobId>{11}));  // the head again: nothing behind it is tried
}

// array_floor_pass_over (default on): an element no GPU takes yet with its learned floor
// is passed over while a sibling runs, and blocks as any head once none does.
TEST(Holds, AnElementWaitingForItsLearnedFloorBlocksOnlyWhenNoSiblingRuns) {
  for (bool on : {false, true}) {
    EngineConfig c = config();
    c.array_floor_pass_over = on;
    Lifecycle life(c, {});
    submit_array(life, 10, 3);
    Placer1 p;
    life.schedule(1, p);
    life.first_activity(10, 2);
    life.memory_seen(10, 9000, 2);
    p.refused = {11, 12};  // no GPU offers 9000 + 2048 MiB free yet
    life.submitted(plain(20), false, false, 0);
    auto fx = life.schedule(62, p);  // the probe peaked and still runs
    ASSERT_EQ(life.find(11)->queued.recovery.floor_mib, 9000 + 2048);
    if (!on) {  // the published strict head-of-line: the element is the head, 20 waits
      EXPECT_TRUE(started(fx).empty()) << on;
      continue;
    }
    EXPECT_EQ(started(fx), (std::set<JobId>{20}));
    EXPECT_NE(life.find(11)->reason.find("passed over while 1 of its elements run"), std::string::npos)
        << life.find(11)->reason;
    life.ended(10, {AttemptOutcome::Completed, ""}, 100);  // no sibling runs now
    life.submitted(plain(21), false, false, 0);
    p.asked.clear();
    fx = life.schedule(100, p);
    EXPECT_TRUE(started(fx).empty());  // 11 is the head again: the array cannot starve
    EXPECT_EQ(p.asked, (std::vector<JobId>{11}));  // nothing behind it is tried
  }
}

TEST(Holds, TheArrayCapLimitsHowManyElementsRunAtOnce) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 5, 2);
  Placer1 p;
  auto fx = life.schedule(1, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{10}));
  life.ended(10, {AttemptOutcome::Completed, ""}, 2);
  fx = life.schedule(2, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{11, 12}));
  EXPECT_NE(life.find(13)->reason.find("%2"), std::string::npos) << life.find(13)->reason;
  life.ended(12, {AttemptOutcome::Completed, ""}, 3);
  fx = life.schedule(3, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{13}));
}

TEST(Holds, WithoutProbingTheElementsGoAtOnceUnderTheirCapWithNoFloor) {
  EngineConfig c = config();
  c.array_probe = false;
  Lifecycle life(c, {});
  submit_array(life, 10, 5, 3);
  Placer1 p;
  auto fx = life.schedule(1, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{10, 11, 12}));  // no probe to wait for; the cap holds
  EXPECT_NE(life.find(13)->reason.find("%3"), std::string::npos) << life.find(13)->reason;
  life.first_activity(10, 5);
  EXPECT_FALSE(life.memory_seen(10, 9000, 5));  // nothing to learn: no wake
  life.ended(10, {AttemptOutcome::Completed, ""}, 100);
  fx = life.schedule(100, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{13}));
  EXPECT_EQ(life.find(13)->queued.recovery.floor_mib, 0);  // the probe's peak is not handed out
}

TEST(Holds, AfterOkWaitsForCompletionThenStarts) {
  Lifecycle life(config(), {});
  life.submitted(plain(1), false, false, 0);
  life.submitted(plain(2), false, false, 0, JobLinks{{{1, AfterKind::Ok}}, 0});
  life.submitted(plain(3), false, false, 0);
  Placer1 p;
  auto fx = life.schedule(1, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{1, 3}));
  EXPECT_NE(life.find(2)->reason.find("waiting for job 1"), std::string::npos);
  life.ended(1, {AttemptOutcome::Completed, ""}, 5);
  fx = life.schedule(5, p);
  EXPECT_EQ(started(fx), (std::set<JobId>{2}));
}

TEST(Holds, ADependencyThatCanNoLongerBeMetCancelsTheJobAndThoseAfterIt) {
  Lifecycle life(config(), {});
  life.submitted(plain(1), false, false, 0);
  life.submitted(plain(2), false, false, 0, JobLinks{{{1, AfterKind::Ok}}, 0});
  life.submitted(plain(3), false, false, 0, JobLinks{{{2, AfterKind::Any}}, 0});
  life.submitted(plain(4), false, false, 0, JobLinks{{{1, AfterKind::Failed}}, 0});
  Placer1 p;
  life.schedule(1, p);
  life.ended(1, {AttemptOutcome::Failed, "exit 1"}, 5);
  auto fx = life.schedule(5, p);
  EXPECT_EQ(life.find(2)->state, JobState::Cancelled);
  EXPECT_NE(life.find(2)->reason.find("can no longer be met: job 1 failed"), std::string::npos) << life.find(2)->reason;
  // Job 3 waited for any end of job 2: the cancel is one, so it runs.
  EXPECT_EQ(started(fx), (std::set<JobId>{3, 4}));
}

TEST(Holds, AnOkDependencyOnACancelledJobAndAFailedOneOnACompletedJobAreCancelled) {
  Lifecycle life(config(), {});
  life.submitted(plain(1), false, false, 0);
  life.submitted(plain(2), false, false, 0);
  life.submitted(plain(3), false, false, 0, JobLinks{{{1, AfterKind::Ok}}, 0});
  life.submitted(plain(4), false, false, 0, JobLinks{{{2, AfterKind::Failed}}, 0});
  life.cancel(1, "", 1);
  Placer1 p;
  life.schedule(1, p);
  life.ended(2, {AttemptOutcome::Completed, ""}, 5);
  life.schedule(5, p);
  EXPECT_EQ(life.find(3)->state, JobState::Cancelled);
  EXPECT_EQ(life.find(4)->state, JobState::Cancelled);
  EXPECT_NE(life.find(4)->reason.find("job 2 completed (--after 2:failed)"), std::string::npos) << life.find(4)->reason;
}

TEST(Holds, AnArraysIdMeansAllItsElements) {
  Lifecycle life(config(), {});
  submit_array(life, 10, 3);
  life.submitted(plain(20), false, false, 0, JobLinks{{{10, AfterKind::Ok}}, 0});
  EXPECT_EQ(life.after_of(20), (std::vector<After>{{10, AfterKind::Ok}, {11, AfterKind::Ok}, {12, AfterKind::Ok}}));
  Placer1 p;
  life.schedule(1, p);
  life.ended(10, {AttemptOutcome::Completed, ""}, 2);
  life.schedule(2, p);
  life.ended(11, {AttemptOutcome::Completed, ""}, 3);
  EXPECT_TRUE(life.schedule(3, p).starts.empty());  // 12 still runs
  life.ended(12, {AttemptOutcome::Completed, ""}, 4);
  EXPECT_EQ(started(life.schedule(4, p)), (std::set<JobId>{20}));
}

TEST(Holds, AfterARestartTheDriverTellsTheFinalStateOfJobsNoLongerHeld) {
  Lifecycle life(config(), {});
  LifeJob waiting;
  waiting.queued.spec = plain(2);
  waiting.queue_seq = 1;
  life.restore(waiting, JobLinks{{{1, AfterKind::Ok}}, 0});
  Placer1 p;
  // Job 1 is neither held nor told: it is unknown, the dependency can never be met.
  {
    Lifecycle other(config(), {});
    other.restore(waiting, JobLinks{{{1, AfterKind::Ok}}, 0});
    other.schedule(1, p);
    EXPECT_EQ(other.find(2)->state, JobState::Cancelled);
  }
  life.known_final(1, JobState::Completed);
  EXPECT_EQ(started(life.schedule(1, p)), (std::set<JobId>{2}));
}

}  // namespace
}  // namespace aegis

namespace aegis {
namespace {

// The simulator numbers jobs from 0: an array whose first element is job 0 is probed too.
TEST(Holds, AnArrayWhoseIdIsZeroIsProbed) {
  Lifecycle life(config(), {});
  submit_array(life, 0, 3);
  Placer1 p;
  EXPECT_EQ(started(life.schedule(0, p)), (std::set<JobId>{0}));
  EXPECT_EQ(life.find(1)->state, JobState::Queued);
}

}  // namespace
}  // namespace aegis

namespace aegis {
namespace {

// After a restart the probe's peak is gone (it ended before), but the floors it gave are
// stored: an element whose floor no GPU offers runs alone rather than failing, and one
// that waits for its floor is passed over while a sibling runs, as before the restart.
TEST(Holds, AfterARestartTheFloorsAnArrayGaveAreStillItsOwn) {
  Lifecycle life(config(), {});
  life.known_element(10, 10, 0, JobState::Completed);  // the probe, ended before the restart
  auto restore = [&](JobId id, MiB floor, std::uint64_t seq) {
    LifeJob e;
    e.queued.spec = element(10, static_cast<int>(id - 10));
    e.queued.recovery.floor_mib = floor;
    e.queue_seq = seq;
    life.restore(e, JobLinks{{}, 0});
  };
  restore(11, 39000 + 2048, 1);  // more than any GPU offers
  restore(12, 9000 + 2048, 2);
  restore(13, 9000 + 2048, 3);
  LifeJob other;
  other.queued.spec = plain(20);
  other.queue_seq = 4;
  life.restore(other);
  Placer1 p;
  p.largest = 40000;
  p.refused = {13};  // no GPU offers 13 its floor yet
  auto fx = life.schedule(1, p);
  EXPECT_EQ(life.find(11)->state, JobState::Running) << life.find(11)->reason;
  EXPECT_TRUE(life.find(11)->queued.recovery.exclusive_only);
  EXPECT_EQ(started(fx), (std::set<JobId>{11, 12, 20}));  // 13 passed over: 11 and 12 run
  EXPECT_NE(life.find(13)->reason.find("passed over while 2 of its elements run"), std::string::npos)
      << life.find(13)->reason;
}

}  // namespace
}  // namespace aegis
