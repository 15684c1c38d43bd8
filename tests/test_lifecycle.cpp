// The job lifecycle on its own (src/lifecycle): its transitions, queue order, strict
// head-of-line, the recovery bookkeeping, feasibility, MPS limits and the inputs a policy
// needs, with a scripted placer standing in for the GPUs.
#include <gtest/gtest.h>

#include <bit>
#include <deque>
#include <set>

#include "lifecycle/inputs.h"
#include "lifecycle/lifecycle.h"
#include "sched/policies.h"

namespace aegis {
namespace {

// A placer that places the jobs a test lets through, on GPU 0, alone, exclusive or not.
class ScriptedPlacer : public Placer {
 public:
  std::set<JobId> placeable;     // these start when asked
  std::set<JobId> never;         // these can never run here
  bool alone = false;
  bool exclusive = false;
  MiB admitted = 1000;
  MiB free = 0;                  // the GPU's free memory at placement
  std::vector<JobId> asked;      // in the order place() was called
  std::variant<Requeue, Stop> (*rule)(const Failure&) = nullptr;

  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    asked.push_back(job.spec.id);
    if (!placeable.count(job.spec.id)) return std::nullopt;
    Launch l;
    l.job = job.spec.id;
    l.gpus = {0};
    l.alone = alone;
    l.exclusive = exclusive;
    l.admitted_mib = admitted;
    l.free_at_placement = free;
    Placement p;
    p.parts.push_back({0, l, 40960});
    return p;
  }
  void started(const QueuedJob&, const Placement&, Seconds) override {}
  // Why the last job asked waits, in words naming it.
  std::optional<Blocked> blocked() const override {
    if (asked.empty() || placeable.count(asked.back())) return std::nullopt;
    Blocked b;
    b.job = asked.back();
    b.reason = "job" + std::to_string(b.job) + " is not let through";
    return b;
  }
  std::optional<std::string> never_runs(const QueuedJob& job) const override {
    if (never.count(job.spec.id)) return std::string("job.gpus: too many");
    return std::nullopt;
  }
  std::variant<Requeue, Stop> recover(const Failure& f) const override {
    if (rule) return rule(f);
    if (f.kind != FailureKind::Oom) return Stop{f.job.spec.id, f.detail};
    RecoveryState r = f.job.recovery;
    r.oom_count++;
    r.floor_mib = 20000;
    return Requeue{f.job.spec.id, r, "after OOM"};
  }
};

JobSpec spec(JobId id) {
  JobSpec s;
  s.id = id;
  s.name = "job" + std::to_string(id);
  return s;
}

Lifecycle make(bool strict = true, bool mps = false) {
  EngineConfig c;
  c.strict_head_of_line = strict;
  LifecycleOptions o;
  o.mps_limits = mps;
  return Lifecycle(c, o);
}

TEST(Lifecycle, SubmitPlaceCompleteWithEveryChangeReported) {
  auto life = make();
  auto fx = life.submitted(spec(1), false, false, 10);
  ASSERT_EQ(fx.changes.size(), 1u);
  EXPECT_EQ(fx.changes[0].event, "submit");
  EXPECT_EQ(life.find(1)->state, JobState::Queued);
  ScriptedPlacer p;
  p.placeable = {1};
  fx = life.schedule(11, p);
  ASSERT_EQ(fx.starts.size(), 1u);
  EXPECT_EQ(fx.starts[0].attempt, 1);
  EXPECT_EQ(fx.changes.back().event, "launch");
  EXPECT_EQ(life.find(1)->state, JobState::Running);
  EXPECT_EQ(life.find(1)->started_at, 11);
  EXPECT_TRUE(life.first_activity(1, 12).changes.size() == 1);
  EXPECT_TRUE(life.first_activity(1, 13).changes.empty());  // once
  EXPECT_EQ(life.running_on(0).front().first_activity, 12);
  fx = life.ended(1, {AttemptOutcome::Completed, "exit status 0"}, 20);
  EXPECT_EQ(life.find(1)->state, JobState::Completed);
  EXPECT_EQ(life.find(1)->ended_at, 20);
  EXPECT_EQ(fx.changes.back().event, "completed");
  EXPECT_FALSE(life.has_work());
}

TEST(Lifecycle, StrictHeadOfLineTriesNothingBehindAWaitingJob) {
  for (bool strict : {true, false}) {
    auto life = make(strict);
    for (JobId i = 1; i <= 3; ++i) life.submitted(spec(i), false, false, 0);
    ScriptedPlacer p;
    p.placeable = {2, 3};
    auto fx = life.schedule(10, p);
    if (strict) {
      EXPECT_EQ(p.asked, std::vector<JobId>({1}));
      EXPECT_TRUE(fx.starts.empty());
    } else {
      EXPECT_EQ(p.asked, std::vector<JobId>({1, 2, 3}));
      EXPECT_EQ(fx.starts.size(), 2u);
    }
    EXPECT_EQ(life.queue_order().front(), 1);
  }
}

// Without strict head-of-line the jobs behind a waiting one are tried, and some may wait
// too: the reason shown (`aegis queue`) is the first waiting job's, whatever comes after.
TEST(Lifecycle, WithoutStrictHeadOfLineTheFirstWaitingJobKeepsItsReason) {
  for (bool strict : {true, false}) {
    auto life = make(strict);
    for (JobId i = 1; i <= 4; ++i) life.submitted(spec(i), false, false, 0);
    ScriptedPlacer p;
    p.placeable = {2, 4};  // 1 and 3 wait
    const auto fx = life.schedule(10, p);
    ASSERT_TRUE(fx.blocked) << "strict " << strict;
    EXPECT_EQ(fx.blocked->job, 1) << "strict " << strict;
    EXPECT_EQ(fx.blocked->reason, "job1 is not let through") << "strict " << strict;
    EXPECT_EQ(fx.starts.size(), strict ? 0u : 2u);
  }
}

TEST(Lifecycle, AJobThatCanNeverRunLeavesTheQueue) {
  auto life = make();
  life.submitted(spec(1), false, false, 0);
  life.submitted(spec(2), false, false, 0);
  ScriptedPlacer p;
  p.never = {1};
  p.placeable = {2};
  auto fx = life.schedule(1, p);
  EXPECT_EQ(life.find(1)->state, JobState::Failed);
  EXPECT_EQ(life.find(1)->reason, "job.gpus: too many");
  EXPECT_EQ(fx.starts.size(), 1u);  // it blocked nothing behind it
}

TEST(Lifecycle, OomGoesThroughTheRecoveryRuleToTheRecoveryQueueFirst) {
  auto life = make(false);
  ScriptedPlacer p;
  for (JobId i = 1; i <= 2; ++i) life.submitted(spec(i), false, false, 0);
  p.placeable = {1};
  life.schedule(1, p);
  auto fx = life.ended(1, {AttemptOutcome::Oom, "CUDA out of memory"}, 5);
  EXPECT_EQ(fx.changes.back().event, "oom");
  EXPECT_TRUE(life.has_work());
  p.asked.clear();
  p.placeable = {};
  fx = life.schedule(6, p);
  const LifeJob& j = *life.find(1);
  EXPECT_EQ(j.state, JobState::Queued);
  EXPECT_EQ(j.queue, QueueName::Recovery);
  EXPECT_EQ(j.queued.recovery.floor_mib, 20000);
  EXPECT_EQ(j.queued.recovery.oom_count, 1);
  EXPECT_EQ(p.asked.front(), 1);  // the recovery queue is served before the main queue
  EXPECT_EQ(life.queue_order(), std::vector<JobId>({1, 2}));
  // Another failure stops it, with the reason.
  p.placeable = {1};
  life.schedule(7, p);
  life.ended(1, {AttemptOutcome::Failed, "exit status 3"}, 8);
  life.schedule(9, p);
  EXPECT_EQ(life.find(1)->state, JobState::Failed);
  EXPECT_EQ(life.find(1)->reason, "exit status 3");
  EXPECT_EQ(life.find(1)->attempts.size(), 2u);
}

TEST(Lifecycle, NeverStartedKeepsItsPlaceAFewTimes) {
  auto life = make(false);
  ScriptedPlacer p;
  life.submitted(spec(1), false, false, 0);
  life.submitted(spec(2), false, false, 0);
  for (int i = 0; i < 3; ++i) {
    p.placeable = {1};
    life.schedule(i, p);
    life.ended(1, {AttemptOutcome::Lost, "never started"}, i + 0.5);
    if (i < 2) {
      EXPECT_EQ(life.queue_order().front(), 1) << "its old place, ahead of job 2";
    }
  }
  EXPECT_EQ(life.find(1)->state, JobState::Failed);
  EXPECT_NE(life.find(1)->reason.find("3 times in a row"), std::string::npos);
}

// An attempt the host interrupted (the daemon saw its GPU's MPS control daemon stopped by
// a user's quit while it ran: issue 33) goes back to its place as often as it happens,
// without touching its recovery state, and does not count towards the unstarted limit.
TEST(Lifecycle, InterruptedByTheHostIsRequeuedWithoutPenalty) {
  auto life = make(false);
  ScriptedPlacer p;
  life.submitted(spec(1), false, false, 0);
  life.submitted(spec(2), false, false, 0);
  const std::string why = std::string(kInterruptedByHost) + "its GPU's MPS control daemon was stopped";
  for (int i = 0; i < 5; ++i) {
    p.placeable = {1};
    life.schedule(i, p);
    life.ended(1, {AttemptOutcome::Lost, why}, i + 0.5);
    EXPECT_EQ(life.find(1)->state, JobState::Queued);
    EXPECT_EQ(life.queue_order().front(), 1) << "its old place, ahead of job 2";
    EXPECT_NE(life.find(1)->reason.find("not counted against it"), std::string::npos);
  }
  const auto& r = life.find(1)->queued.recovery;
  EXPECT_EQ(r.oom_count, 0);
  EXPECT_EQ(r.floor_mib, 0);
  EXPECT_FALSE(r.exclusive_only);
  // A real unstarted launch after them is still counted from one.
  p.placeable = {1};
  life.schedule(10, p);
  life.ended(1, {AttemptOutcome::Lost, "never started"}, 10.5);
  EXPECT_EQ(life.find(1)->state, JobState::Queued);
}

TEST(Lifecycle, UnknownOutcomesRunAgainOnlyWhenRestartable) {
  auto life = make(false);
  ScriptedPlacer p;
  life.submitted(spec(1), false, false, 0);
  life.submitted(spec(2), false, true, 0);
  p.placeable = {1, 2};
  life.schedule(1, p);
  life.ended(1, {AttemptOutcome::Unknown, "outcome unknown: attempt 1"}, 2);
  life.ended(2, {AttemptOutcome::Unknown, "outcome unknown: attempt 1"}, 2);
  EXPECT_EQ(life.find(1)->state, JobState::Failed);
  EXPECT_NE(life.find(1)->reason.find("--restartable"), std::string::npos);
  EXPECT_EQ(life.find(2)->state, JobState::Queued);
}

TEST(Lifecycle, CancelQueuedNowRunningBySignal) {
  auto life = make(false);
  ScriptedPlacer p;
  life.submitted(spec(1), false, false, 0);
  life.submitted(spec(2), false, false, 0);
  p.placeable = {1};
  life.schedule(1, p);
  auto fx = life.cancel(2, "", 2);
  EXPECT_EQ(life.find(2)->state, JobState::Cancelled);
  EXPECT_TRUE(fx.signals.empty());
  fx = life.cancel(1, "its client is gone", 2);
  EXPECT_EQ(fx.signals, std::vector<JobId>({1}));
  EXPECT_EQ(life.find(1)->state, JobState::Running);
  // It died of OOM while stopping: it was asked to stop, so it is cancelled, not retried.
  life.ended(1, {AttemptOutcome::Oom, "CUDA out of memory"}, 3);
  EXPECT_EQ(life.find(1)->state, JobState::Cancelled);
  EXPECT_EQ(life.find(1)->reason, "cancelled: its client is gone");
}

// Under MPS every job others may join gets a limit, also one alone on its GPU for now
// (unlimited it could grow into a later neighbour's memory); only an exclusive one not.
TEST(Lifecycle, MpsLimitUnlessExclusive) {
  for (const auto& [alone, exclusive] : {std::pair{true, false}, std::pair{false, false}, std::pair{true, true}}) {
    SCOPED_TRACE(std::to_string(alone) + std::to_string(exclusive));
    auto life = make(true, true);
    ScriptedPlacer p;
    p.alone = alone;
    p.exclusive = exclusive;
    p.admitted = 6000;
    JobSpec s = spec(1);
    s.estimates.declared = 6000;  // what is known of it (lifecycle/mps_limit.h)
    life.submitted(s, false, false, 0);
    p.placeable = {1};
    auto fx = life.schedule(1, p);
    ASSERT_EQ(fx.starts.size(), 1u);
    if (exclusive) {
      EXPECT_FALSE(fx.starts[0].mps_limit_mib);
    } else {
      EXPECT_EQ(fx.starts[0].mps_limit_mib, 6000 + EngineConfig{}.memory_margin_mib);
    }
  }
  auto plain = make(true, false);
  ScriptedPlacer p;
  plain.submitted(spec(1), false, false, 0);
  p.placeable = {1};
  EXPECT_FALSE(plain.schedule(1, p).starts[0].mps_limit_mib);
}

// A job's MPS limit comes from what is known of it, never from the estimator-free floor
// (issue 30: with the floor every limit was 5,120 + 2,048 MiB, and every larger job died
// at it first): the policy's estimate as booked; else its declared memory or recorded
// peak, the larger, not below a ladder floor; else its GPU's free memory at placement.
TEST(Lifecycle, MpsLimitComesFromWhatIsKnownOfTheJob) {
  const MiB margin = EngineConfig{}.memory_margin_mib;
  struct Row {
    const char* what;
    std::string estimator;
    std::optional<MiB> declared, history;
    MiB floor, admitted, limit;
  };
  const Row rows[] = {
      {"nothing known: its free memory at placement", "none", {}, {}, 0, 5120, 30000},
      {"nothing known after an OOM: still the free memory", "none", {}, {}, 20000, 20000, 30000},
      {"declared", "none", 9000, {}, 0, 5120, 9000 + margin},
      {"history above declared", "none", 9000, 12000, 0, 5120, 12000 + margin},
      {"declared below the ladder's floor", "none", 9000, {}, 20000, 20000, 20000 + margin},
      {"the policy's estimate, as booked", "declared", 9000, 12000, 0, 9000, 9000 + margin},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    EngineConfig c;
    c.estimator = r.estimator;
    LifecycleOptions o;
    o.mps_limits = true;
    Lifecycle life(c, o);
    JobSpec s = spec(1);
    s.estimates.declared = r.declared;
    s.estimates.history = r.history;
    life.submitted(s, false, false, 0);
    ScriptedPlacer p;
    p.placeable = {1};
    p.admitted = r.admitted;
    p.free = 30000;
    if (r.floor > 0) {  // one OOM first: the placer's rule requeues it with a floor of 20000
      life.schedule(0, p);
      life.ended(1, {AttemptOutcome::Oom, "CUDA out of memory"}, 1);
    }
    auto fx = life.schedule(2, p);
    ASSERT_EQ(fx.starts.size(), 1u);
    EXPECT_EQ(life.find(1)->queued.recovery.floor_mib, r.floor);
    EXPECT_EQ(fx.starts[0].mps_limit_mib, r.limit);
  }
}

// Under MPS a job on several GPUs runs alone on them (one control daemon per GPU, and a
// client reaches one): submitted or restored, it is exclusive; a one-GPU job is not, and
// without MPS neither is.
TEST(Lifecycle, MultiGpuJobsRunAloneUnderMps) {
  for (const bool mps : {false, true}) {
    SCOPED_TRACE(mps);
    EngineConfig c;
    c.mps = mps;
    Lifecycle life(c, LifecycleOptions{});
    JobSpec one = spec(1), two = spec(2);
    two.num_gpus = 2;
    life.submitted(one, false, false, 0);
    life.submitted(two, false, false, 0);
    EXPECT_FALSE(life.find(1)->queued.recovery.exclusive_only);
    EXPECT_EQ(life.find(2)->queued.recovery.exclusive_only, mps);
    LifeJob restored;
    restored.queued.spec = spec(3);
    restored.queued.spec.num_gpus = 2;
    life.restore(restored);
    EXPECT_EQ(life.find(3)->queued.recovery.exclusive_only, mps);
  }
}

TEST(Lifecycle, AWithdrawnLaunchNeverHappened) {
  auto life = make(false);
  ScriptedPlacer p;
  life.submitted(spec(1), false, false, 0);
  life.submitted(spec(2), false, false, 0);
  p.placeable = {1};
  life.schedule(1, p);
  life.withdraw(1, "disk full");
  EXPECT_EQ(life.find(1)->state, JobState::Queued);
  EXPECT_TRUE(life.find(1)->attempts.empty());
  EXPECT_FALSE(life.find(1)->started_at);
  EXPECT_EQ(life.queue_order(), std::vector<JobId>({1, 2}));
}

TEST(Lifecycle, RestoredRunningJobWhoseFailureWasNotDecidedIsDecidedNext) {
  auto life = make();
  LifeJob j;
  j.queued.spec = spec(7);
  j.state = JobState::Running;
  LifeAttempt a;
  a.number = 1;
  a.ended_at = 5;
  a.outcome = AttemptOutcome::Oom;
  a.placement.parts.push_back({0, Launch{7, {0}, false, false, 4000, 30000}, 40960});
  j.attempts.push_back(a);
  life.restore(j);
  EXPECT_TRUE(life.has_work());
  ScriptedPlacer p;
  life.schedule(6, p);
  EXPECT_EQ(life.find(7)->queue, QueueName::Recovery);
}

// ServerPlacer's kept loads (the simulator's O(GPUs) ticks) equal, bit for bit, what a
// tick sums walking `running`, through any sequence of starts, first activities and
// removals; and the engine decides the same with them as without them.
TEST(ServerPlacerLoads, EqualTheSumsOfAWalkThroughAnyChanges) {
  const Engine engine(policy_config("horus"));  // reads the utilisation sums
  ServerPlacer kept(engine), walked(engine);
  for (auto* p : {&kept, &walked}) {
    p->views.resize(4);
    for (int g = 0; g < 4; ++g) p->views[g] = GpuView{g, "GPU-" + std::to_string(g), 40960, 40960, 0, 0, TelemetryLevel::Full, false, {}};
  }
  kept.keep_loads();
  std::uint64_t x = 12345;
  auto rnd = [&](std::uint64_t n) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return (x >> 33) % n; };
  for (int step = 0; step < 2000; ++step) {
    const auto op = rnd(3);
    if (op == 0 || kept.running.empty()) {
      QueuedJob j;
      j.spec.id = step;
      j.spec.num_gpus = 1 + static_cast<int>(rnd(2));
      j.spec.hints.gpu_util = 0.1 * static_cast<double>(rnd(10)) + 0.013;
      j.spec.owner = static_cast<std::int64_t>(rnd(3));
      if (rnd(2) == 0) j.spec.predicted_util = 0.07 * static_cast<double>(rnd(10)) + 0.011;
      Launch l;
      l.job = step;
      l.admitted_mib = 1000 + static_cast<MiB>(rnd(5000));
      l.exclusive = rnd(7) == 0;
      l.gpus = {static_cast<int>(rnd(4))};
      if (j.spec.num_gpus == 2) l.gpus.push_back((l.gpus[0] + 1) % 4);
      kept.add(j, l, step);
      walked.add(j, l, step);
    } else if (op == 1) {
      const auto pos = rnd(kept.running.size());
      kept.set_first_activity(pos, step);
      walked.running[pos].first_activity = step;
    } else {
      const auto pos = rnd(kept.running.size());
      kept.remove(pos);
      if (pos + 1 != walked.running.size()) walked.running[pos] = std::move(walked.running.back());
      walked.running.pop_back();
    }
    // Asked after some steps only: changes pile up between two asks (a first activity
    // then a removal on one GPU, ...), as a burst of events does in the simulator.
    if (rnd(3) == 0) continue;
    const auto loads = kept.loads();
    for (int g = 0; g < 4; ++g) {
      GpuLoad want;
      for (const auto& r : walked.running)
        for (int h : r.gpus)
          if (h == g) engine.add_load(want, r);
      ASSERT_EQ(loads[g].job_count, want.job_count) << step;
      ASSERT_EQ(loads[g].booked_mib, want.booked_mib) << step;
      ASSERT_EQ(loads[g].has_exclusive, want.has_exclusive) << step;
      ASSERT_EQ(std::bit_cast<std::uint64_t>(loads[g].util_sum), std::bit_cast<std::uint64_t>(want.util_sum)) << step;
      ASSERT_EQ(loads[g].min_gpu_count, want.min_gpu_count) << step;
      ASSERT_EQ(loads[g].max_gpu_count, want.max_gpu_count) << step;
      ASSERT_EQ(std::bit_cast<std::uint64_t>(loads[g].predicted_idle), std::bit_cast<std::uint64_t>(want.predicted_idle))
          << step;
      ASSERT_EQ(loads[g].score_sum, want.score_sum) << step;
      ASSERT_EQ(loads[g].owner, want.owner) << step;
      ASSERT_EQ(loads[g].owners_differ, want.owners_differ) << step;
      ASSERT_EQ(loads[g].gate_opens_at, want.gate_opens_at) << step;
    }
    // The engine's answer for a new job is the same with the kept loads and with the walk.
    QueuedJob probe;
    probe.spec.id = 100000 + step;
    probe.spec.hints.gpu_util = 0.3;
    const auto a = kept.probe(probe, step + 0.5, false), b = walked.probe(probe, step + 0.5, false);
    ASSERT_EQ(a.has_value(), b.has_value()) << step;
    if (a) {
      EXPECT_EQ(a->gpus, b->gpus) << step;
    }
    kept.state = walked.state;
  }
}

TEST(PolicyInputs, EachPolicyNeedsWhatItsStagesRead) {
  EXPECT_EQ(required_inputs(policy_config("aegis")), JobInputs{});
  EXPECT_EQ(required_inputs(policy_config("aegis-auto")), JobInputs{});
  EXPECT_EQ(required_inputs(policy_config("aegis-peak")), inputs({JobInput::Profiled}));
  EXPECT_EQ(required_inputs(policy_config("aegis-horus")), inputs({JobInput::Analytical}));
  EXPECT_EQ(required_inputs(policy_config("aegis-learned")), inputs({JobInput::Learned}));
  EXPECT_EQ(required_inputs(policy_config("lucid")), inputs({JobInput::Profiled, JobInput::SharingScoreHint}));
  EXPECT_EQ(required_inputs(policy_config("horus")), inputs({JobInput::Analytical, JobInput::GpuUtilHint}));
  // A driver that cannot give an input: one line naming it; a job that lacks it: the field.
  const auto why = missing_for_policy("lucid", policy_config("lucid"), inputs({JobInput::Declared}));
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "policy lucid needs a profiled memory peak and the sharing score hint of every job, which this "
                  "driver cannot provide (it provides the declared memory)");
  JobSpec s;
  s.estimates.profiled = 4000;
  const auto lacking = missing_for_job("lucid", policy_config("lucid"), s);
  ASSERT_TRUE(lacking);
  EXPECT_NE(lacking->find("--hint-sharing-score"), std::string::npos) << *lacking;
  s.hints.sharing_score = 1;
  EXPECT_FALSE(missing_for_job("lucid", policy_config("lucid"), s));
}

}  // namespace
}  // namespace aegis
