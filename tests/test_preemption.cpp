// Priorities and checkpoint-aware preemption in the lifecycle (issue 32 item 1,
// lifecycle/preemption.h): which running jobs a waiting head of a higher level stops, the
// warning before the stop, the requeue without penalty, AEGIS_RESUME's flag, and the
// freed GPUs kept for the head. The engine is the real one (the `exclusive` policy: a
// job takes a whole GPU), asked through aegisd's OneServerPlacer.
#include <gtest/gtest.h>

#include <algorithm>

#include <csignal>
#include <sys/stat.h>

#include "lifecycle/lifecycle.h"
#include "lifecycle/preemption.h"
#include "runtime/daemon/daemon.h"
#include "sched/policies.h"
#include "tests/fake_env.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

constexpr MiB kGpu = 40960;

// The exclusive policy with the exemption of young attempts at `exempt` s (0 in the tests
// of the rule itself, whose victims ran seconds; the exemption's own tests set it).
EngineConfig exclusive(Seconds exempt, double growth = 1) {
  EngineConfig c = policy_config("exclusive");
  c.preempt_exempt_s = exempt;
  c.preempt_exempt_growth = growth;
  return c;
}

// GPUs as the daemon would read them: each running job's memory in use on its GPUs.
struct Server {
  Engine engine;
  Lifecycle life;
  int gpus;

  explicit Server(int n, bool preemption = true, Seconds exempt = 0, double growth = 1)
      : engine(exclusive(exempt, growth)),
        life(engine.config(), [&] {
          LifecycleOptions o;
          o.preemption = preemption;
          return o;
        }()),
        gpus(n) {}

  Effects schedule(Seconds t) {
    OneServerPlacer p(engine);
    for (int i = 0; i < gpus; ++i) {
      GpuView v;
      v.index = i;
      v.uuid = "GPU-" + std::to_string(i);
      v.total_mib = kGpu;
      v.free_mib = kGpu;
      p.server.views.push_back(v);
    }
    p.server.running = life.running_on(0);
    for (const auto& r : p.server.running)
      for (int g : r.gpus) {
        p.server.views[static_cast<std::size_t>(g)].free_mib -= 1000;
        p.server.views[static_cast<std::size_t>(g)].process_count++;
      }
    return life.schedule(t, p);
  }

  void submit(JobId id, int priority, Seconds t, int gpus_wanted = 1, int signal = 0, Seconds lead = 0) {
    JobSpec s;
    s.id = id;
    s.num_gpus = gpus_wanted;
    s.priority = priority;
    s.checkpoint_signal = signal;
    s.checkpoint_lead_s = lead;
    life.submitted(s, false, false, t);
  }

  // Submitted and started at `t` (the queue empty before).
  void running(JobId id, int priority, Seconds t, int signal = 0, Seconds lead = 0) {
    submit(id, priority, t, 1, signal, lead);
    const Effects fx = schedule(t);
    ASSERT_EQ(fx.starts.size(), 1u);
    ASSERT_EQ(fx.starts[0].job, id);
    life.first_activity(id, t + 1);
  }
};

std::vector<JobId> started(const Effects& fx) {
  std::vector<JobId> out;
  for (const auto& s : fx.starts) out.push_back(s.job);
  return out;
}

TEST(Preemption, StopsTheRunningJobThatLosesTheLeastWorkAndOnlyOne) {
  Server s(2);
  s.running(1, 0, 0);
  s.running(2, 0, 50);
  s.submit(3, 5, 100);
  const Effects fx = s.schedule(100);
  EXPECT_TRUE(fx.starts.empty()) << "it waits for its victim to stop";
  EXPECT_EQ(fx.signals, std::vector<JobId>{2}) << "job 2 ran 50 s, job 1 100 s: job 2 loses less";
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 3);
  EXPECT_EQ(s.life.preemptions(), 1);
  // It stops; back to its place with nothing of a failure, and the head starts on its GPU.
  const Effects end = s.life.ended(2, {AttemptOutcome::Cancelled, "killed by signal 15"}, 101);
  const LifeJob* v = s.life.find(2);
  EXPECT_EQ(v->state, JobState::Queued);
  EXPECT_EQ(v->queue, QueueName::Main);
  EXPECT_EQ(v->queued.recovery.oom_count, 0);
  EXPECT_EQ(v->queued.recovery.floor_mib, 0);
  EXPECT_NE(v->reason.find("preempted for job 3"), std::string::npos) << v->reason;
  const Effects next = s.schedule(102);
  EXPECT_EQ(started(next), std::vector<JobId>{3}) << "the freed GPU is the head's, not its victim's (ahead in FIFO)";
  EXPECT_EQ(s.life.find(1)->state, JobState::Running);
}

TEST(Preemption, ASavedCheckpointMakesALongRunningJobTheCheaperVictim) {
  Server s(2);
  s.running(1, 0, 0);
  s.running(2, 0, 50);
  s.life.checkpointed(1, 90);  // job 1 would lose 10 s, job 2 50 s
  s.submit(3, 5, 100);
  EXPECT_EQ(s.schedule(100).signals, std::vector<JobId>{1});
}

// Work lost is counted in GPU-seconds (issue 32 item 1): an 8-GPU job loses eight times
// what a 1-GPU job started with it loses. Job 2, the 8-GPU one, is the later job, which
// the old rule (seconds, ties to the later job) chose.
TEST(Preemption, CountsTheWorkLostInGpuSecondsSoTheOneGpuJobIsTheVictim) {
  Server s(9);
  s.submit(1, 0, 0, 1);
  s.submit(2, 0, 0, 8);
  ASSERT_EQ(started(s.schedule(0)), (std::vector<JobId>{1, 2}));
  s.submit(3, 5, 100);  // one GPU; the server is full
  EXPECT_EQ(s.schedule(100).signals, std::vector<JobId>{1}) << "job 1 would lose 100 GPU-s, job 2 800";

  // Seconds alone would choose the 8-GPU job started later (50 s against 100 s).
  Server later(9);
  later.submit(1, 0, 0, 1);
  ASSERT_EQ(started(later.schedule(0)), std::vector<JobId>{1});
  later.submit(2, 0, 50, 8);
  ASSERT_EQ(started(later.schedule(50)), std::vector<JobId>{2});
  later.submit(3, 5, 100);
  EXPECT_EQ(later.schedule(100).signals, std::vector<JobId>{1}) << "100 GPU-s against 400";

  // A checkpoint still counts: the 8-GPU job saved 10 s before, 80 GPU-s against 100.
  Server saved(9);
  saved.submit(1, 0, 0, 1);
  saved.submit(2, 0, 0, 8);
  ASSERT_EQ(started(saved.schedule(0)), (std::vector<JobId>{1, 2}));
  saved.life.checkpointed(2, 90);
  saved.submit(3, 5, 100);
  EXPECT_EQ(saved.schedule(100).signals, std::vector<JobId>{2});
}

TEST(Preemption, OnlyAsManyAsTheHeadNeeds) {
  Server s(3);
  s.running(1, 0, 0);
  s.running(2, 0, 10);
  s.submit(3, 1, 20, 2);  // two GPUs: one idle, one to free
  const Effects fx = s.schedule(20);
  EXPECT_EQ(fx.signals, std::vector<JobId>{2});
  s.life.ended(2, {AttemptOutcome::Cancelled, ""}, 21);
  EXPECT_EQ(started(s.schedule(22)), std::vector<JobId>{3});
}

TEST(Preemption, NothingHappensWhenOffAtAnEqualLevelOrWhenItCannotHelp) {
  {
    Server off(1, false);
    off.running(1, 0, 0);
    off.submit(2, 5, 10);
    const Effects fx = off.schedule(10);
    EXPECT_TRUE(fx.signals.empty() && fx.warnings.empty());
    EXPECT_EQ(off.life.preemptions(), 0);
  }
  {
    Server equal(1);
    equal.running(1, 3, 0);
    equal.submit(2, 3, 10);
    EXPECT_TRUE(equal.schedule(10).signals.empty()) << "same level: it waits its turn";
  }
  {
    Server higher_runs(1);
    higher_runs.running(1, 5, 0);
    higher_runs.submit(2, 1, 10);
    EXPECT_TRUE(higher_runs.schedule(10).signals.empty());
  }
  {
    Server too_big(1);
    too_big.running(1, 0, 0);
    too_big.submit(2, 5, 10, 2);  // two GPUs on a one-GPU server: stopping job 1 does not help
    const Effects fx = too_big.schedule(10);
    EXPECT_TRUE(fx.signals.empty());
    EXPECT_EQ(too_big.life.find(1)->state, JobState::Running);
  }
}

TEST(Preemption, WarnsWithItsSignalThenStopsWhenItSavedOrAtItsLeadTime) {
  Server s(2);
  s.running(1, 0, 0, 10, 120);  // SIGUSR1, 120 s
  s.running(2, 0, 5, 10, 120);
  s.submit(3, 5, 100);
  const Effects warn = s.schedule(100);
  ASSERT_EQ(warn.warnings.size(), 1u);
  EXPECT_EQ(warn.warnings[0].job, 2);
  EXPECT_EQ(warn.warnings[0].signal, 10);
  EXPECT_EQ(warn.warnings[0].attempt, 1);
  EXPECT_TRUE(warn.signals.empty()) << "warned, not stopped yet";
  ASSERT_TRUE(warn.wake_at);
  EXPECT_EQ(*warn.wake_at, 220);
  EXPECT_TRUE(s.schedule(150).signals.empty()) << "within its lead time";
  EXPECT_TRUE(s.life.checkpointed(2, 90).signals.empty()) << "a checkpoint from before the warning is no answer";
  EXPECT_EQ(s.life.checkpointed(2, 160).signals, std::vector<JobId>{2}) << "it saved: stopped at once";
  EXPECT_TRUE(s.schedule(161).signals.empty()) << "stopped once";

  Server late(2);
  late.running(1, 0, 0, 10, 120);
  late.running(2, 0, 5, 10, 120);
  late.submit(3, 5, 100);
  late.schedule(100);
  EXPECT_EQ(late.schedule(220).signals, std::vector<JobId>{2}) << "lead time over";
}

TEST(Preemption, TheNextAttemptResumesAndSoDoesAnOomRetry) {
  Server s(1);
  s.submit(1, 0, 0);
  const Effects first = s.schedule(0);
  ASSERT_EQ(first.starts.size(), 1u);
  EXPECT_FALSE(first.starts[0].resume) << "nothing saved before its first attempt";
  s.submit(2, 5, 10);
  s.schedule(10);
  s.life.ended(1, {AttemptOutcome::Cancelled, ""}, 11);
  ASSERT_EQ(started(s.schedule(12)), std::vector<JobId>{2});
  s.life.ended(2, {AttemptOutcome::Completed, ""}, 20);
  const Effects again = s.schedule(21);
  ASSERT_EQ(started(again), std::vector<JobId>{1});
  EXPECT_EQ(again.starts[0].attempt, 2);
  EXPECT_TRUE(again.starts[0].resume);

  // An OOM-ladder retry: the job as the recovery rule queued it again (recovery queue, a
  // floor, its first attempt ended by the OOM).
  Server oom(1, false);
  LifeJob j;
  j.queued.spec.id = 7;
  j.state = JobState::Queued;
  j.queue = QueueName::Recovery;
  j.queue_seq = 1;
  j.queued.recovery.oom_count = 1;
  j.queued.recovery.floor_mib = 10240;
  LifeAttempt& first_try = j.attempts.emplace_back();
  first_try.number = 1;
  first_try.outcome = AttemptOutcome::Oom;
  first_try.ended_at = 5;
  oom.life.restore(j);
  const Effects retry = oom.schedule(6);
  ASSERT_EQ(started(retry), std::vector<JobId>{7});
  EXPECT_EQ(retry.starts[0].attempt, 2);
  EXPECT_TRUE(retry.starts[0].resume) << "the OOM ladder's retry resumes through the same hook";
}

TEST(Preemption, AJobThatCompletesOrIsCancelledWhileWarnedIsNotRequeued) {
  Server s(1);
  s.running(1, 0, 0, 10, 60);
  s.submit(2, 5, 10);
  s.schedule(10);
  s.life.ended(1, {AttemptOutcome::Completed, ""}, 20);
  EXPECT_EQ(s.life.find(1)->state, JobState::Completed);
  EXPECT_EQ(started(s.schedule(21)), std::vector<JobId>{2});

  Server c(1);
  c.running(1, 0, 0);
  c.submit(2, 5, 10);
  c.schedule(10);  // stopped at once (no signal asked for)
  c.life.cancel(1, "by its user", 11);
  c.life.ended(1, {AttemptOutcome::Cancelled, ""}, 12);
  EXPECT_EQ(c.life.find(1)->state, JobState::Cancelled) << "a cancel is a cancel, preempted or not";
}

TEST(Preemption, AVictimRestoredAfterARestartIsStillStoppedAndItsHeadStillServedFirst) {
  // What aegisd persisted: job 1 warned for job 2 at t=10, to be stopped by t=70.
  Server s(1);
  s.running(1, 0, 0, 10, 60);
  s.submit(2, 5, 10);
  s.schedule(10);
  LifeJob victim = *s.life.find(1);
  LifeJob head = *s.life.find(2);

  Server again(1);
  again.life.restore(victim);
  again.life.restore(head);
  EXPECT_EQ(again.life.preemptor(), std::optional<JobId>(2));
  const Effects before = again.schedule(30);
  EXPECT_TRUE(before.signals.empty() && before.warnings.empty()) << "not warned twice, not stopped early";
  EXPECT_EQ(again.schedule(70).signals, std::vector<JobId>{1});
  again.life.ended(1, {AttemptOutcome::Cancelled, ""}, 71);
  EXPECT_EQ(started(again.schedule(72)), std::vector<JobId>{2});
  EXPECT_EQ(again.life.find(1)->state, JobState::Queued);
}

// Issue 32 item 1's thrash: a job just (re)started has the least work at risk, so the
// rule alone picks it again and again. An attempt younger than preempt_exempt_s is spared
// (Slurm's PreemptExemptTime); the older job is stopped instead.
TEST(Preemption, AnAttemptYoungerThanTheExemptTimeIsNotAVictim) {
  Server s(2, true, 600);
  s.running(1, 0, 0);
  s.running(2, 0, 500);  // 200 s old at t=700: least work at risk, but exempt
  s.submit(3, 5, 700);
  const Effects fx = s.schedule(700);
  EXPECT_EQ(fx.signals, std::vector<JobId>{1}) << "job 2 is younger than 600 s";
  EXPECT_EQ(s.life.find(2)->state, JobState::Running);
}

// A head whose only candidates are young waits, stops nobody, and asks again when the
// first of them comes of age (launched + preempt_exempt_s), then stops it.
TEST(Preemption, AHeadWhoseOnlyCandidatesAreYoungWaitsUntilTheyComeOfAge) {
  Server s(1, true, 600);
  s.running(1, 0, 100);
  s.submit(2, 5, 200);
  const Effects young = s.schedule(200);
  EXPECT_TRUE(young.signals.empty() && young.warnings.empty()) << "job 1 ran 100 s of its exempt 600";
  EXPECT_EQ(s.life.preemptions(), 0);
  ASSERT_TRUE(young.wake_at);
  EXPECT_EQ(*young.wake_at, 700);
  EXPECT_TRUE(s.schedule(699).signals.empty());
  EXPECT_EQ(s.schedule(700).signals, std::vector<JobId>{1}) << "of age at 700 s";
  // Resumed, its new attempt is exempt again: a second head cannot stop it at once.
  s.life.ended(1, {AttemptOutcome::Cancelled, ""}, 701);
  ASSERT_EQ(started(s.schedule(702)), std::vector<JobId>{2});
  s.life.ended(2, {AttemptOutcome::Completed, ""}, 800);
  ASSERT_EQ(started(s.schedule(801)), std::vector<JobId>{1});
  s.submit(3, 5, 850);
  EXPECT_TRUE(s.schedule(850).signals.empty()) << "its second attempt is 49 s old";
}

// preempt_exempt_growth: a job that is the only candidate (the QoS study's 8-GPU pod,
// preempted 46 times) is spared longer after each preemption: with growth 2 its second
// attempt is exempt for 1,200 s, not 600.
TEST(Preemption, WithExemptGrowthAJobPreemptedBeforeIsSparedLonger) {
  for (double growth : {1.0, 2.0}) {
    Server s(1, true, 600, growth);
    s.running(1, 0, 0);
    s.submit(2, 5, 600);
    ASSERT_EQ(s.schedule(600).signals, std::vector<JobId>{1}) << "its first attempt: 600 s";
    s.life.ended(1, {AttemptOutcome::Cancelled, ""}, 601);
    ASSERT_EQ(started(s.schedule(602)), std::vector<JobId>{2});
    s.life.ended(2, {AttemptOutcome::Completed, ""}, 700);
    ASSERT_EQ(started(s.schedule(701)), std::vector<JobId>{1});
    EXPECT_EQ(earlier_preemptions(*s.life.find(1)), 1);
    s.submit(3, 5, 1301);
    const Effects at_600 = s.schedule(1301);  // its second attempt is 600 s old
    if (growth == 1) {
      EXPECT_EQ(at_600.signals, std::vector<JobId>{1}) << "growth 1: 600 s for every attempt";
      continue;
    }
    EXPECT_TRUE(at_600.signals.empty()) << "growth 2: 1,200 s after one preemption";
    ASSERT_TRUE(at_600.wake_at);
    EXPECT_EQ(*at_600.wake_at, 1901);
    EXPECT_EQ(s.schedule(1901).signals, std::vector<JobId>{1});
  }
}

// Issue 32 item 1's order defect: the recovery queue was served before the main queue
// whatever the levels, so a level-0 OOM retry held level-1 jobs back. Levels dominate;
// within a level the recovery queue still comes first.
struct Retry {
  JobId id;
  int priority;
};
void restore_retry(Server& s, Retry r, std::int64_t seq) {
  LifeJob j;  // as the recovery rule queued it again after an OOM
  j.queued.spec.id = r.id;
  j.queued.spec.priority = r.priority;
  j.state = JobState::Queued;
  j.queue = QueueName::Recovery;
  j.queue_seq = seq;
  j.queued.recovery.oom_count = 1;
  LifeAttempt& a = j.attempts.emplace_back();
  a.number = 1;
  a.outcome = AttemptOutcome::Oom;
  a.ended_at = 5;
  s.life.restore(j);
}

TEST(PriorityOrder, AHigherLevelInTheMainQueueGoesBeforeALowerLevelRetry) {
  Server s(1, false);
  restore_retry(s, {7, 0}, 1);
  s.submit(8, 1, 6);
  EXPECT_EQ(s.life.queue_order(), (std::vector<JobId>{8, 7}));
  EXPECT_EQ(started(s.schedule(6)), std::vector<JobId>{8}) << "level 1 first, though job 7 is a retry";
}

TEST(PriorityOrder, WithinALevelTheRecoveryQueueStillComesFirst) {
  Server s(1, false);
  restore_retry(s, {7, 1}, 1);
  s.submit(8, 1, 6);
  s.submit(9, 0, 6);
  EXPECT_EQ(s.life.queue_order(), (std::vector<JobId>{7, 8, 9}));
  EXPECT_EQ(started(s.schedule(6)), std::vector<JobId>{7});
}

// Head-of-line by level: a level-1 job that cannot start yet (two GPUs, one busy) is the
// head; the level-0 retry behind it, which would fit, waits too (strict head-of-line).
TEST(PriorityOrder, AWaitingHigherLevelHeadHoldsALowerLevelRetryBehindIt) {
  Server s(2, false);
  s.running(1, 0, 0);
  restore_retry(s, {7, 0}, 2);
  s.submit(8, 1, 10, 2);
  const Effects fx = s.schedule(10);
  EXPECT_TRUE(fx.starts.empty()) << "job 7 may not pass the head";
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 8);
}

// With preemption, the level-1 head stops a level-0 job instead of waiting behind the retry.
TEST(PriorityOrder, AHigherLevelHeadPreemptsThoughALowerLevelRetryWaits) {
  Server s(1);
  s.running(1, 0, 0);
  restore_retry(s, {7, 0}, 2);
  s.submit(8, 1, 10);
  EXPECT_EQ(s.schedule(10).signals, std::vector<JobId>{1});
  s.life.ended(1, {AttemptOutcome::Cancelled, ""}, 11);
  EXPECT_EQ(started(s.schedule(12)), std::vector<JobId>{8});
}

TEST(ChooseVictims, LeastWorkFirstThenOnlyThoseNeeded) {
  // Job 1 frees 1 unit, job 2 frees 1, job 3 frees 4; the head needs 4.
  const std::map<JobId, int> frees = {{1, 1}, {2, 1}, {3, 4}};
  auto fits = [&](std::span<const JobId> gone) {
    int sum = 0;
    for (JobId id : gone) sum += frees.at(id);
    return sum >= 4;
  };
  const auto v = choose_victims({{1, 0, 10}, {2, 0, 20}, {3, 0, 30}}, fits);
  EXPECT_EQ(v, std::vector<JobId>{3}) << "1 and 2 were taken first, then not needed once 3 was";
  EXPECT_TRUE(choose_victims({{1, 0, 10}, {2, 0, 20}}, fits).empty()) << "nobody stopped for nothing";
  // Ties in work: the lower level first, then the later job.
  auto one = [](std::span<const JobId> gone) { return !gone.empty(); };
  EXPECT_EQ(choose_victims({{1, 2, 10}, {2, 1, 10}}, one), std::vector<JobId>{2});
  EXPECT_EQ(choose_victims({{1, 1, 10}, {2, 1, 10}}, one), std::vector<JobId>{2});
}

// Work in GPU-seconds, in all: a 1-GPU job before an 8-GPU one of the same age; and where
// the head needs sixteen GPUs, one 16-GPU job of 900 s (14,400 GPU-s) before sixteen
// 1-GPU jobs of 990 s (15,840 GPU-s in all), though each of those loses less alone.
TEST(ChooseVictims, TheVictimsThatLoseTheLeastGpuSecondsInAll) {
  std::map<JobId, int> gpus = {{1, 1}, {2, 8}};
  auto fits = [&](int need) {
    return [&, need](std::span<const JobId> gone) {
      int sum = 0;
      for (JobId id : gone) sum += gpus.at(id);
      return sum >= need;
    };
  };
  EXPECT_EQ(choose_victims({{1, 0, 100, 1}, {2, 0, 100, 8}}, fits(1)), std::vector<JobId>{1});
  EXPECT_EQ(choose_victims({{1, 0, 100, 1}, {2, 0, 100, 8}}, fits(8)), std::vector<JobId>{2});
  std::vector<VictimCandidate> c;
  gpus = {{100, 16}};
  c.push_back({100, 0, 900, 16});
  for (JobId id = 1; id <= 16; ++id) {
    gpus[id] = 1;
    c.push_back({id, 0, 990, 1});
  }
  EXPECT_EQ(choose_victims(c, fits(16)), std::vector<JobId>{100});
  c[0].seconds_at_risk = 1000;  // 16,000 GPU-s: now the sixteen lose less
  EXPECT_EQ(choose_victims(c, fits(16)).size(), 16u);
}

// The cost at cluster scale (a gang head on 64 servers x 8 GPUs: 512 candidates, asked at
// every pass while it waits): `fits` is asked once when even all of them would not make
// room, and at most twice per candidate when some are stopped.
TEST(ChooseVictims, AsksFitsOnceWhenNobodyIsStoppedAndAtMostTwicePerCandidateOtherwise) {
  std::vector<VictimCandidate> c;
  for (JobId id = 1; id <= 512; ++id) c.push_back({id, 0, static_cast<Seconds>(id)});
  int asks = 0;
  // Each candidate frees one GPU; the head needs `need` of them.
  int need = 513;
  auto fits = [&](std::span<const JobId> gone) {
    ++asks;
    return static_cast<int>(gone.size()) >= need;
  };
  EXPECT_TRUE(choose_victims(c, fits).empty());
  EXPECT_EQ(asks, 1);
  for (int n : {1, 16, 512}) {
    need = n;
    asks = 0;
    EXPECT_EQ(choose_victims(c, fits).size(), static_cast<std::size_t>(n));
    EXPECT_LE(asks, 2 * 512) << n;
  }
}

// aegisd on the fake environment (tests/fake_env.h), one GPU, the exclusive policy.
struct DaemonRig {
  test::FakeEnv env;
  DaemonConfig cfg;
  std::unique_ptr<Daemon> d;

  explicit DaemonRig(bool preemption = true) {
    cfg.daemon.state_dir = test::temp_path("state");
    mkdir(cfg.daemon.state_dir.c_str(), 0700);
    cfg.daemon.policy = "exclusive";
    cfg.daemon.durability = "normal";
    cfg.daemon.preemption = preemption;
    cfg.daemon.priority_levels = "*:0, ann:0..5";
    cfg.daemon.checkpoint_dir = "/ckpt";
    cfg.engine = exclusive(0);  // its victims ran seconds
    env.gpus = test::fake_gpus(1, 40960);
    d = std::make_unique<Daemon>(cfg, env);
  }
  nlohmann::json submit(uid_t uid, int priority, int signal = 0, double lead = 0) {
    api::SubmitRequest r;
    r.job.command = {"python3", "train.py"};
    r.job.workdir = "/tmp";
    r.job.name = "train";
    r.job.priority = priority;
    r.job.checkpoint_signal = signal;
    r.job.checkpoint_lead_s = lead;
    return d->respond(r, Caller{uid, uid, 1}).object;
  }
  JobId submit_ok(uid_t uid, int priority, int signal = 0, double lead = 0) {
    auto r = submit(uid, priority, signal, lead);
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
    return r["id"].get<JobId>();
  }
  nlohmann::json show(JobId id) { return d->respond(api::ShowRequest{id}, Caller{0, 0, 1}).object["job"]; }
  void tick(Seconds dt = 1) {
    env.clock += dt;
    d->tick(env.clock);
  }
};

TEST(DaemonPreemption, APriorityAboveTheCallersAllowanceIsOneLineAndNothingIsQueued) {
  DaemonRig rig;
  const auto refused = rig.submit(1002, 1);
  EXPECT_FALSE(refused["ok"].get<bool>());
  EXPECT_EQ(refused["error"], "--priority 1: bob may use level 0 (the admin's priority_levels)");
  const auto too_high = rig.submit(1001, 6);
  EXPECT_EQ(too_high["error"], "--priority 6: ann may use levels 0, 0..5 (the admin's priority_levels)");
  rig.tick();
  EXPECT_TRUE(rig.env.launched.empty()) << "nothing was queued";
  rig.submit_ok(1001, 5);
  rig.submit_ok(1002, 0);
}

TEST(DaemonPreemption, WarnsStopsOnItsCheckpointRequeuesAndResumesWithItsVariables) {
  DaemonRig rig;
  const JobId victim = rig.submit_ok(1002, 0, SIGUSR1, 60);
  rig.tick();
  ASSERT_EQ(rig.show(victim)["state"], "running");
  EXPECT_EQ(rig.env.env_of(victim, "AEGIS_ATTEMPT"), "1");
  EXPECT_EQ(rig.env.env_of(victim, "AEGIS_CHECKPOINT_DIR"), "/ckpt/" + std::to_string(victim));
  EXPECT_EQ(rig.env.env_of(victim, "AEGIS_RESUME"), "");
  const auto dir = rig.env.checkpoint_dirs.find("/ckpt/" + std::to_string(victim));
  ASSERT_NE(dir, rig.env.checkpoint_dirs.end()) << "made before its launch";
  EXPECT_EQ(dir->second, (std::pair<uid_t, gid_t>{1002, 1002})) << "its user's";
  rig.env.activity(victim, 1, 0, 30000, 4242);
  rig.tick();

  const JobId head = rig.submit_ok(1001, 5);
  rig.tick();
  ASSERT_EQ(rig.env.warned.size(), 1u);
  EXPECT_EQ(rig.env.warned[0], std::make_tuple(victim, 1, SIGUSR1));
  EXPECT_TRUE(rig.env.stops.empty()) << "warned, not stopped";
  rig.tick();
  EXPECT_EQ(rig.env.warned.size(), 1u) << "warned once";
  rig.env.checkpoint_times["/ckpt/" + std::to_string(victim)] = rig.env.clock;  // it touched `checkpointed`
  rig.tick();
  ASSERT_EQ(rig.env.stops.size(), 1u);
  EXPECT_EQ(rig.env.stops[0], (Env::AttemptKey{victim, 1}));
  rig.env.end(victim, 1, SIGTERM);
  rig.env.status[{victim, 1}].cancelled = true;  // the shim passed the stop on
  rig.env.gpus[0].processes.clear();
  rig.tick();
  rig.tick();
  EXPECT_EQ(rig.show(head)["state"], "running");
  EXPECT_EQ(rig.show(victim)["state"], "queued");
  EXPECT_EQ(rig.show(victim)["recovery"]["oom_count"], 0);
  rig.env.end(head, 1, 0);
  rig.tick();
  rig.tick();
  ASSERT_EQ(rig.show(victim)["state"], "running");
  EXPECT_EQ(rig.env.env_of(victim, "AEGIS_ATTEMPT"), "2");
  EXPECT_EQ(rig.env.env_of(victim, "AEGIS_RESUME"), "1");
}

// A stop asked for and recorded, then aegisd killed before the victim's end was recorded:
// the restarted daemon signals the stop again, and the end that follows is a preemption
// (requeued), not the cancel the shim reports it as.
TEST(DaemonPreemption, ARestartAfterTheStopWasAskedForStopsItAgainAndRequeuesIt) {
  DaemonRig rig;
  const JobId victim = rig.submit_ok(1002, 0);  // no warning: stopped at once
  rig.tick();
  rig.env.activity(victim, 1, 0, 30000, 4242);
  rig.tick();
  const JobId head = rig.submit_ok(1001, 5);
  rig.tick();
  ASSERT_EQ(rig.env.stops.size(), 1u);
  rig.env.stops.clear();
  rig.d.reset();  // killed; the victim still runs
  rig.d = std::make_unique<Daemon>(rig.cfg, rig.env);
  EXPECT_EQ(rig.env.stops, (std::vector<Env::AttemptKey>{{victim, 1}})) << "the stop, maybe unsent, is sent again";
  rig.env.end(victim, 1, SIGTERM);
  rig.env.status[{victim, 1}].cancelled = true;
  rig.env.gpus[0].processes.clear();
  rig.tick();
  rig.tick();
  EXPECT_EQ(rig.show(victim)["state"], "queued");
  EXPECT_EQ(rig.show(head)["state"], "running");
}

}  // namespace
}  // namespace aegis
