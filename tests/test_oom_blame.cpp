// An OOM on a shared GPU beside a job that grew past its declared memory plus the margin
// (src/lifecycle/lifecycle_blame.cpp, docs/security.md "A neighbour that lies about its
// memory"): the victim is requeued without penalty, the grower charged, and the reason
// gives the GPU's free memory in the last sample at or before the failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "lifecycle/lifecycle.h"

namespace aegis {
namespace {

// Every job on GPU 0 of 40960 MiB, admitted with its declared figure (else 5120), placed
// with what is left of 40960 after those admitted before it.
class SharedGpu : public Placer {
 public:
  MiB booked = 0;
  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    Launch l;
    l.job = job.spec.id;
    l.gpus = {0};
    l.admitted_mib = job.spec.estimates.declared.value_or(5120);
    l.free_at_placement = 40960 - booked;
    booked += l.admitted_mib;
    Placement p;
    p.parts.push_back({0, l, 40960});
    return p;
  }
  void started(const QueuedJob&, const Placement&, Seconds) override {}
  std::optional<std::string> never_runs(const QueuedJob&) const override { return std::nullopt; }
  // The ladder's part that matters here: an OOM raises the count and the floor.
  std::variant<Requeue, Stop> recover(const Failure& f) const override {
    if (f.kind != FailureKind::Oom) return Stop{f.job.spec.id, f.detail};
    RecoveryState r = f.job.recovery;
    r.oom_count++;
    r.floor_mib = 30720;
    return Requeue{f.job.spec.id, r, "after OOM"};
  }
};

constexpr JobId kGrower = 1, kVictim = 2;

JobSpec spec(JobId id, std::optional<MiB> declared) {
  JobSpec s;
  s.id = id;
  s.name = "job" + std::to_string(id);
  s.estimates.declared = declared;
  return s;
}

Lifecycle make(bool stop = true) {
  EngineConfig c;
  c.estimator = "declared";  // admitted on the user's figure; memory_margin_mib 2048 (the default)
  LifecycleOptions o;
  o.oom_blame_stop = stop;
  return Lifecycle(c, o);
}

// The grower (declared 2G) and the victim (declared 20G) started side by side.
void start_both(Lifecycle& life, SharedGpu& gpu, std::optional<MiB> grower_declared = 2048) {
  life.submitted(spec(kGrower, grower_declared), false, false, 0);
  life.submitted(spec(kVictim, 20480), false, false, 0);
  ASSERT_EQ(life.schedule(1, gpu).starts.size(), 2u);
}

// One reading of GPU 0: its free memory and each job's memory there.
ActivityReadings reading(MiB free, MiB grower, MiB victim) {
  ActivityReadings r;
  r.gpu_free_mib[0] = free;
  r.jobs[kGrower].push_back({0, grower, std::nullopt});
  r.jobs[kVictim].push_back({0, victim, std::nullopt});
  return r;
}

const Effects::Change* change_of(const Effects& fx, JobId id, std::string_view event) {
  auto it = std::find_if(fx.changes.begin(), fx.changes.end(),
                         [&](const Effects::Change& c) { return c.job == id && c.event == event; });
  return it == fx.changes.end() ? nullptr : &*it;
}

TEST(OomBlame, TheGrowerIsChargedAndTheVictimRequeuedWithoutPenalty) {
  Lifecycle life = make();
  SharedGpu gpu;
  start_both(life, gpu);
  life.observe(reading(31000, 1000, 8000), 10);   // small through its window
  life.observe(reading(1960, 30000, 8000), 20);   // then 30000 MiB
  const Effects fx = life.ended(kVictim, {AttemptOutcome::Oom, "CUDA out of memory"}, 21);
  life.observe(reading(2960, 30000, 0), 22);      // after the failure: not the figure
  // The victim: back in the recovery queue, its recovery state untouched.
  const LifeJob* v = life.find(kVictim);
  EXPECT_EQ(v->state, JobState::Queued);
  EXPECT_EQ(v->queue, QueueName::Recovery);
  EXPECT_EQ(v->queued.recovery.oom_count, 0);
  EXPECT_EQ(v->queued.recovery.floor_mib, 0);
  const auto* rq = change_of(fx, kVictim, "requeue");
  ASSERT_NE(rq, nullptr);
  EXPECT_NE(rq->detail.find("without penalty"), std::string::npos) << rq->detail;
  EXPECT_NE(rq->detail.find("with 1960 MiB free, as job 1 grew to 30000 MiB"), std::string::npos) << rq->detail;
  // The grower: told to stop, charged in its history.
  const auto* blamed = change_of(fx, kGrower, "blamed");
  ASSERT_NE(blamed, nullptr);
  EXPECT_NE(blamed->detail.find("job 2 ran out of memory"), std::string::npos) << blamed->detail;
  EXPECT_EQ(fx.signals, std::vector<JobId>{kGrower});
  // Its end, by our signal, is its own OOM: the recovery rule climbs its ladder.
  life.ended(kGrower, {AttemptOutcome::Cancelled, "killed by SIGTERM"}, 23);
  SharedGpu again;
  const Effects next = life.schedule(24, again);
  const LifeJob* g = life.find(kGrower);
  EXPECT_EQ(g->attempts.front().outcome, AttemptOutcome::Oom);
  EXPECT_EQ(g->queued.recovery.oom_count, 1);
  EXPECT_EQ(g->queued.recovery.floor_mib, 30720);
  ASSERT_NE(change_of(next, kGrower, "requeue"), nullptr);
  // The victim was served first (recovery queue, its own place), with its first recovery state.
  ASSERT_EQ(next.starts.size(), 2u);
  EXPECT_EQ(next.starts.front().job, kVictim);
  EXPECT_EQ(life.find(kVictim)->attempts.back().placement.parts.front().launch.admitted_mib, 20480);
}

TEST(OomBlame, WithoutStoppingTheGrowerIsChargedAndRunsOn) {
  Lifecycle life = make(false);
  SharedGpu gpu;
  start_both(life, gpu);
  life.observe(reading(1960, 30000, 8000), 20);
  const Effects fx = life.ended(kVictim, {AttemptOutcome::Oom, "CUDA out of memory"}, 21);
  EXPECT_TRUE(fx.signals.empty());
  ASSERT_NE(change_of(fx, kGrower, "blamed"), nullptr);
  EXPECT_EQ(life.find(kGrower)->queued.recovery.oom_count, 1);
  EXPECT_TRUE(life.find(kGrower)->holds_gpus());
  EXPECT_EQ(life.find(kVictim)->queued.recovery.oom_count, 0);
  // Its later end is its own: a failure stays a failure.
  life.ended(kGrower, {AttemptOutcome::Failed, "exit 1"}, 30);
  SharedGpu again;
  life.schedule(31, again);
  EXPECT_EQ(life.find(kGrower)->state, JobState::Failed);
}

TEST(OomBlame, ANeighbourWithinItsAdmissionAndMarginIsNotBlamed) {
  Lifecycle life = make();
  SharedGpu gpu;
  start_both(life, gpu);
  // 2048 admitted + 2048 margin: 4096 is within, and the victim within its 20480 + 2048.
  life.observe(reading(1960, 4096, 22000), 20);
  const Effects fx = life.ended(kVictim, {AttemptOutcome::Oom, "CUDA out of memory"}, 21);
  EXPECT_EQ(change_of(fx, kGrower, "blamed"), nullptr);
  EXPECT_TRUE(fx.signals.empty());
  life.observe(reading(36864, 4096, 0), 22);  // after the failure: not the figure
  SharedGpu again;
  const Effects next = life.schedule(23, again);
  EXPECT_EQ(life.find(kVictim)->queued.recovery.oom_count, 1);  // the ladder, as before
  const auto* rq = change_of(next, kVictim, "requeue");
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(rq->detail, "after OOM; 1960 MiB were free at the failure");
}

TEST(OomBlame, AVictimPastItsOwnFigureIsNotAVictim) {
  Lifecycle life = make();
  SharedGpu gpu;
  start_both(life, gpu);
  life.observe(reading(0, 9000, 31960), 20);  // both past: the victim 20480 + 2048 < 31960
  const Effects fx = life.ended(kVictim, {AttemptOutcome::Oom, "CUDA out of memory"}, 21);
  EXPECT_EQ(change_of(fx, kGrower, "blamed"), nullptr);
  SharedGpu again;
  life.schedule(22, again);
  EXPECT_EQ(life.find(kVictim)->queued.recovery.oom_count, 1);
}

TEST(OomBlame, AJobAdmittedWithoutAFigureMadeNoPromise) {
  Lifecycle life = make();
  SharedGpu gpu;
  start_both(life, gpu, std::nullopt);  // the grower is observed, not declared
  life.observe(reading(1960, 30000, 8000), 20);
  const Effects fx = life.ended(kVictim, {AttemptOutcome::Oom, "CUDA out of memory"}, 21);
  EXPECT_EQ(change_of(fx, kGrower, "blamed"), nullptr);
  SharedGpu again;
  life.schedule(22, again);
  EXPECT_EQ(life.find(kVictim)->queued.recovery.oom_count, 1);
}

TEST(OomBlame, AnEstimatorsGuessThatFellShortIsNoLie) {
  // Admitted on its history (2048 MiB), not on a figure its user gave: the scheduler's error.
  Lifecycle life = make();
  SharedGpu gpu;
  JobSpec g = spec(kGrower, std::nullopt);
  g.estimates.history = 2048;
  life.submitted(g, false, false, 0);
  life.submitted(spec(kVictim, 20480), false, false, 0);
  ASSERT_EQ(life.schedule(1, gpu).starts.size(), 2u);
  life.observe(reading(1960, 30000, 8000), 20);
  const Effects fx = life.ended(kVictim, {AttemptOutcome::Oom, "CUDA out of memory"}, 21);
  EXPECT_EQ(change_of(fx, kGrower, "blamed"), nullptr);
  SharedGpu again;
  life.schedule(22, again);
  EXPECT_EQ(life.find(kVictim)->queued.recovery.oom_count, 1);
}

TEST(OomBlame, WithoutReadingsTheRecoveryRuleDecidesAsBefore) {
  // The simulator gives no readings: nothing is blamed and no figure is added.
  Lifecycle life = make();
  SharedGpu gpu;
  start_both(life, gpu);
  life.ended(kVictim, {AttemptOutcome::Oom, "CUDA out of memory"}, 21);
  SharedGpu again;
  const Effects next = life.schedule(22, again);
  const auto* rq = change_of(next, kVictim, "requeue");
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(rq->detail, "after OOM");
}

}  // namespace
}  // namespace aegis
