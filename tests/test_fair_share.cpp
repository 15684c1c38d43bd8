// Fair share and the queue order (issue 32 item 2, lifecycle/fair_share.h): priority level,
// then Slurm's fair-share factor from decayed usage charged per GPU as fair_share_charge says,
// then FIFO; per-user caps that pass a capped job over without blocking the others; the
// weights' bad input. A scripted placer stands in for the GPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/param_table.h"
#include "lifecycle/fair_share.h"
#include "lifecycle/lifecycle.h"
#include "sched/config_params.h"
#include "sched/policies.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace aegis {
namespace {

// Places the jobs a test lets through on one GPU of 40960 MiB, booking `admitted`.
class Placer1 : public Placer {
 public:
  std::set<JobId> placeable;
  std::vector<JobId> asked;
  MiB admitted = 10240;
  bool exclusive = false;
  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    asked.push_back(job.spec.id);
    if (!placeable.count(job.spec.id)) return std::nullopt;
    Launch l;
    l.job = job.spec.id;
    l.gpus = {0};
    l.exclusive = exclusive;
    l.admitted_mib = admitted;
    Placement p;
    p.parts.push_back({0, l, 40960});
    return p;
  }
  void started(const QueuedJob&, const Placement&, Seconds) override {}
  std::optional<std::string> never_runs(const QueuedJob&) const override { return std::nullopt; }
  std::variant<Requeue, Stop> recover(const Failure& f) const override { return Stop{f.job.spec.id, "failed"}; }
  std::optional<Blocked> blocked() const override {
    Blocked b;
    b.reason = "no room";
    return b;
  }
};

JobSpec job(JobId id, std::int64_t user, int priority = 0) {
  JobSpec s;
  s.id = id;
  s.owner = user;
  s.group = 100;
  s.priority = priority;
  return s;
}

// The config's names are numbers here: the default resolver (aegisd's Env) reads them so.
Lifecycle make(const EngineConfig& c, bool strict = true) {
  EngineConfig e = c;
  e.strict_head_of_line = strict;
  LifecycleOptions o;
  o.share_weights = resolve_share_weights(e, [](std::string_view name, bool) -> std::optional<std::int64_t> {
    return std::stoll(std::string(name));
  });
  return Lifecycle(e, o);
}

// Runs job `id` of its user from t0 to t1 (alone on the GPU).
void run(Lifecycle& life, JobId id, Seconds t0, Seconds t1, MiB admitted = 10240) {
  Placer1 p;
  p.placeable = {id};
  p.admitted = admitted;
  auto fx = life.schedule(t0, p);
  ASSERT_EQ(fx.starts.size(), 1u);
  life.ended(id, {AttemptOutcome::Completed, ""}, t1);
}

TEST(FairShare, WithoutWeightsTheQueueStaysFifoWhateverWasUsed) {
  auto life = make(EngineConfig{});
  life.submitted(job(1, 7), false, false, 0);
  run(life, 1, 0, 1000);
  for (JobId i = 2; i <= 4; ++i) life.submitted(job(i, i == 3 ? 8 : 7), false, false, 1000);
  EXPECT_EQ(life.queue_order(), (std::vector<JobId>{2, 3, 4}));
}

TEST(FairShare, PriorityLevelFirstThenFifoWithinALevel) {
  auto life = make(EngineConfig{});
  life.submitted(job(1, 7, 0), false, false, 0);
  life.submitted(job(2, 7, 2), false, false, 1);
  life.submitted(job(3, 7, 1), false, false, 2);
  life.submitted(job(4, 7, 2), false, false, 3);
  EXPECT_EQ(life.queue_order(), (std::vector<JobId>{2, 4, 3, 1}));
  // Strict head-of-line holds in the new order: the head (level 2) waits, nothing behind it is tried.
  Placer1 p;
  p.placeable = {1, 3, 4};
  auto fx = life.schedule(10, p);
  EXPECT_EQ(p.asked, (std::vector<JobId>{2}));
  EXPECT_TRUE(fx.starts.empty());
}

TEST(FairShare, AUserBelowItsShareIsServedFirst) {
  EngineConfig c;
  c.fair_share_users = "1:2,2:1";
  auto life = make(c);
  // Equal use, 100 s of a quarter GPU each: user 1, with twice the weight, is further below its share.
  life.submitted(job(1, 1), false, false, 0);
  run(life, 1, 0, 100);
  life.submitted(job(2, 2), false, false, 100);
  run(life, 2, 100, 200);
  life.submitted(job(3, 2), false, false, 200);  // user 2 first in the queue
  life.submitted(job(4, 1), false, false, 201);
  Placer1 p;
  p.placeable = {3, 4};
  auto fx = life.schedule(202, p);
  ASSERT_EQ(fx.starts.size(), 2u);
  EXPECT_EQ(fx.starts[0].job, 4);
  EXPECT_EQ(fx.starts[1].job, 3);
  // Slurm's factor 2^(-U/S): equal usage U = 1/2, shares 2/3 and 1/3 (decay is the same for both within a few seconds).
  EXPECT_NEAR(life.fair_share().factor(1, 200), std::exp2(-0.5 / (2.0 / 3)), 0.01);
  EXPECT_NEAR(life.fair_share().factor(2, 200), std::exp2(-0.5 / (1.0 / 3)), 0.01);
}

TEST(FairShare, UsageIsChargedByTheBookedShareOfAGpu) {
  EngineConfig c;
  c.fair_share_users = "*:1";
  c.fair_share_half_life_s = 0;  // no decay: usage is the charge
  c.fair_share_charge = "booked";  // the default (occupied) would charge the lone job its whole GPU
  auto life = make(c);
  life.submitted(job(1, 1), false, false, 0);
  run(life, 1, 0, 100, 10240);  // a quarter of 40960 MiB for 100 s
  EXPECT_DOUBLE_EQ(life.fair_share().charged(1, 500), 25.0);
  EXPECT_DOUBLE_EQ(life.fair_share().usage(1, 500), 25.0);
  // Placed exclusive, nobody may join it: a whole GPU.
  life.submitted(job(2, 2), false, false, 0);
  Placer1 p;
  p.placeable = {2};
  p.exclusive = true;
  life.schedule(0, p);
  life.ended(2, {AttemptOutcome::Completed, ""}, 100);
  EXPECT_DOUBLE_EQ(life.fair_share().charged(2, 500), 100.0);
}

// fair_share_charge = occupied: a GPU's time goes to the jobs on it by their bookings; a
// job alone on its GPU is charged the whole GPU whatever it booked.
TEST(FairShare, OccupiedChargeSplitsEachGpuByTheBookingsOnIt) {
  EngineConfig c;
  c.fair_share_users = "*:1";
  c.fair_share_half_life_s = 0;
  c.fair_share_charge = "occupied";
  auto life = make(c);
  life.submitted(job(1, 1), false, false, 0);
  life.submitted(job(2, 2), false, false, 0);
  Placer1 p;
  p.placeable = {1};
  p.admitted = 10240;
  ASSERT_EQ(life.schedule(0, p).starts.size(), 1u);  // user 1 alone, a quarter booked: 0-100 s
  Placer1 q;
  q.placeable = {2};
  q.admitted = 30720;
  ASSERT_EQ(life.schedule(100, q).starts.size(), 1u);  // user 2 beside it, 3/4 booked: 100-200 s
  life.ended(1, {AttemptOutcome::Completed, ""}, 200);
  life.ended(2, {AttemptOutcome::Completed, ""}, 300);  // user 2 alone: 200-300 s
  EXPECT_DOUBLE_EQ(life.fair_share().charged(1, 400), 100 + 25.0);
  EXPECT_DOUBLE_EQ(life.fair_share().charged(2, 400), 75.0 + 100);
  // The same jobs charged by booking: 10240 and 30720 of 40960 over their runs.
  c.fair_share_charge = "booked";
  auto booked = make(c);
  booked.submitted(job(1, 1), false, false, 0);
  booked.submitted(job(2, 2), false, false, 0);
  booked.schedule(0, p);
  booked.schedule(100, q);
  booked.ended(1, {AttemptOutcome::Completed, ""}, 200);
  booked.ended(2, {AttemptOutcome::Completed, ""}, 300);
  EXPECT_DOUBLE_EQ(booked.fair_share().charged(1, 400), 50.0);
  EXPECT_DOUBLE_EQ(booked.fair_share().charged(2, 400), 150.0);
}

// aegisd's restart: usage rebuilt from the attempts (ended, and running ones) equals the
// live ledger's, in both modes, whatever order the store gives them in.
TEST(FairShare, RebuildFromAttemptsGivesTheLiveUsage) {
  for (const std::string charge : {"booked", "occupied"}) {
    EngineConfig c;
    c.fair_share_users = "1:2,2:1";
    c.fair_share_half_life_s = 500;
    c.fair_share_charge = charge;
    FairShare live(c, resolve_share_weights(c, [](std::string_view n, bool) -> std::optional<std::int64_t> {
                     return std::stoll(std::string(n));
                   }));
    FairShare rebuilt = live;
    const std::vector<PastHold> attempts = {
        {1, 10, {{0, 0, 8192, 40960, false}}, 0, 300},
        {2, 20, {{0, 0, 20480, 40960, false}, {0, 1, 20480, 40960, false}}, 100, 400},
        {1, 10, {{0, 1, 4096, 40960, false}}, 150, std::nullopt},  // still running
        {2, 20, {{0, 2, 40960, 40960, true}}, 50, 250},
        {1, 10, {{0, 0, 10240, 40960, false}}, 300, 600},
    };
    // Live: the same starts and ends as they happen.
    struct E {
      Seconds t;
      bool start;
      std::size_t i;
    };
    std::vector<E> events;
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      events.push_back({attempts[i].from, true, i});
      if (attempts[i].to) events.push_back({*attempts[i].to, false, i});
    }
    std::sort(events.begin(), events.end(), [](const E& x, const E& y) { return x.t < y.t || (x.t == y.t && !x.start && y.start); });
    for (const auto& e : events) {
      const auto& a = attempts[e.i];
      if (e.start) {
        live.started(a.user, a.group, a.gpus, e.t);
      } else {
        live.stopped(a.user, a.gpus, e.t);
        live.ran(a.user, e.t - a.from, e.t);  // (as the lifecycle's charge_stop)
      }
    }
    rebuilt.rebuild({attempts.rbegin(), attempts.rend()});
    for (std::int64_t u : {1, 2}) {
      EXPECT_NEAR(rebuilt.usage(u, 900), live.usage(u, 900), 1e-9) << charge;
      EXPECT_NEAR(rebuilt.charged(u, 900), live.charged(u, 900), 1e-9) << charge;
      EXPECT_GT(live.charged(u, 900), 0);
    }
    EXPECT_NEAR(rebuilt.factor(1, 900), live.factor(1, 900), 1e-12);
    // The run times fair_share_committed counts come back too: user 1's ended attempts ran
    // 300 s each, user 2's 300 and 200 s.
    ASSERT_TRUE(rebuilt.mean_run_time(1).has_value()) << charge;
    EXPECT_NEAR(*rebuilt.mean_run_time(1), 300, 1e-9) << charge;
    EXPECT_NEAR(*rebuilt.mean_run_time(2), 250, 1e-9) << charge;
    EXPECT_EQ(rebuilt.mean_run_time(1), live.mean_run_time(1)) << charge;
  }
}

// fair_share_committed: the mean run time is of the user's own ended attempts only (users
// are hostile: one user's long runs must not commit another's jobs); attempts older than
// 10 half-lives before the latest are forgotten; with `none` nothing is kept.
TEST(FairShare, MeanRunTimeIsTheUsersOwnWithinTheHorizon) {
  EngineConfig c;
  c.fair_share_users = "*:1";
  c.fair_share_half_life_s = 100;  // horizon: 1000 s
  FairShare fs(c, {});
  ASSERT_TRUE(fs.counts_committed());  // the default
  EXPECT_FALSE(fs.mean_run_time(1).has_value());
  fs.ran(1, 100, 100);
  fs.ran(1, 300, 400);
  fs.ran(1, 0, 400);  // held no time: not counted (a restart's rebuild replays no such attempt)
  EXPECT_DOUBLE_EQ(*fs.mean_run_time(1), 200);
  EXPECT_FALSE(fs.mean_run_time(2).has_value());  // none of its own: nothing, not user 1's
  fs.ran(2, 1000, 1100);
  EXPECT_DOUBLE_EQ(*fs.mean_run_time(2), 1000);
  EXPECT_DOUBLE_EQ(*fs.mean_run_time(1), 200);
  fs.ran(2, 50, 1450);  // 1000 s after it the attempts that ended at 100 and 400 are gone
  EXPECT_FALSE(fs.mean_run_time(1).has_value());
  EXPECT_DOUBLE_EQ(*fs.mean_run_time(2), 525);

  c.fair_share_committed = "none";
  FairShare classic(c, {});
  EXPECT_FALSE(classic.counts_committed());
  classic.ran(1, 100, 100);
  EXPECT_FALSE(classic.mean_run_time(1).has_value());
}

// A hostile user's runs commit nobody else: user 1 runs a week-long job to its end; user
// 2's first running job, with no ended attempt of its own, adds nothing to user 2's usage.
TEST(FairShare, OneUsersLongRunsDoNotCommitAnotherUsersJobs) {
  EngineConfig c;
  c.fair_share_users = "*:1";
  c.fair_share_half_life_s = 0;
  c.fair_share_charge = "booked";  // (a rate for either user's job, wherever it runs)
  FairShare fs(c, {});
  fs.ran(1, 7 * 86400.0, 7 * 86400.0);
  Launch l;
  l.gpus = {0};
  l.admitted_mib = 40960;
  Placement whole;
  whole.parts.push_back({0, l, 40960});
  fs.started(2, 0, gpu_holds(whole), 7 * 86400.0);
  EXPECT_EQ(fs.expected_usage(2, whole, 0, std::nullopt), 0);
  EXPECT_GT(fs.expected_usage(1, whole, 0, std::nullopt), 0);  // its own long run commits it
}

Placement one_gpu(MiB admitted, int gpu = 0) {
  Launch l;
  l.gpus = {gpu};
  l.admitted_mib = admitted;
  Placement p;
  p.parts.push_back({0, l, 40960});
  return p;
}

// What a running job is expected to add: its charge rate for the rest of the mean run time,
// nothing once it is older, no longer than its limit leaves; decayed as usage is.
TEST(FairShare, ExpectedUsageIsItsRateForTheRestOfTheMeanRunTimeWithinItsLimit) {
  EngineConfig c;
  c.fair_share_users = "*:1";
  c.fair_share_half_life_s = 0;
  c.fair_share_charge = "booked";
  FairShare fs(c, {});
  const Placement quarter = one_gpu(10240);
  EXPECT_EQ(fs.expected_usage(1, quarter, 0, std::nullopt), 0);  // no attempt ended yet
  fs.ran(1, 1000, 1000);
  EXPECT_DOUBLE_EQ(fs.expected_usage(1, quarter, 400, std::nullopt), 0.25 * 600);
  EXPECT_DOUBLE_EQ(fs.expected_usage(1, quarter, 1200, std::nullopt), 0);
  EXPECT_DOUBLE_EQ(fs.expected_usage(1, quarter, 400, 100.0), 0.25 * 100);
  // Under occupied a job alone on its GPU is charged all of it.
  c.fair_share_charge = "occupied";
  c.fair_share_half_life_s = 1000;
  FairShare occ(c, {});
  occ.ran(1, 1000, 1000);
  occ.started(1, 0, gpu_holds(quarter), 1000);
  const double lambda = std::log(2.0) / 1000;
  EXPECT_NEAR(occ.expected_usage(1, quarter, 400, std::nullopt), (1 - std::exp(-lambda * 600)) / lambda, 1e-9);
}

// A start commits its user to more at once: the rest of the pass is served in the new
// order. User 1 has used less (75 against 100 GPU-seconds) and is served first; its job,
// once started, is expected to add 75 more (a quarter GPU for its 300 s mean run time), so
// user 2's job comes next. With fair_share_committed = none the pass keeps its first order.
TEST(FairShare, AStartCommitsItsUserAndTheRestOfThePassIsOrderedAgain) {
  for (const std::string committed : {"mean_run_time", "none"}) {
    EngineConfig c;
    c.fair_share_users = "1:1,2:1";
    c.fair_share_half_life_s = 0;
    c.fair_share_charge = "booked";
    c.fair_share_committed = committed;
    auto life = make(c);
    life.submitted(job(10, 2), false, false, 0);
    run(life, 10, 0, 400);  // user 2: 100
    life.submitted(job(11, 1), false, false, 400);
    run(life, 11, 400, 700);  // user 1: 75, mean run time 300 s
    life.submitted(job(1, 1), false, false, 700);
    life.submitted(job(2, 1), false, false, 700);
    life.submitted(job(3, 2), false, false, 700);
    EXPECT_EQ(life.queue_order(), (std::vector<JobId>{1, 2, 3})) << committed;
    Placer1 p;
    p.placeable = {1, 2, 3};
    auto fx = life.schedule(700, p);
    ASSERT_EQ(fx.starts.size(), 3u) << committed;
    const std::vector<JobId> order = {fx.starts[0].job, fx.starts[1].job, fx.starts[2].job};
    EXPECT_EQ(order, committed == "none" ? (std::vector<JobId>{1, 2, 3}) : (std::vector<JobId>{1, 3, 2})) << committed;
  }
}

TEST(FairShare, UsageDecaysWithTheHalfLife) {
  EngineConfig c;
  c.fair_share_users = "*:1";
  c.fair_share_half_life_s = 100;
  auto life = make(c);
  life.submitted(job(1, 1), false, false, 0);
  run(life, 1, 0, 100, 40960);  // a whole GPU for 100 s
  // dU/dt = 1 - lambda U over the run: U(100) = (1 - 2^-1) / lambda; then halves every 100 s.
  const double lambda = std::log(2.0) / 100;
  EXPECT_NEAR(life.fair_share().usage(1, 100), 0.5 / lambda, 1e-6);
  EXPECT_NEAR(life.fair_share().usage(1, 300), 0.125 / lambda, 1e-6);
  EXPECT_DOUBLE_EQ(life.fair_share().charged(1, 300), 100.0);
  // Old use weighs less than recent use: user 1 used 100 GPU-s long ago, user 2 50 GPU-s just now.
  life.submitted(job(2, 2), false, false, 1000);
  run(life, 2, 1000, 1050, 40960);
  life.submitted(job(3, 1), false, false, 1050);
  life.submitted(job(4, 2), false, false, 1050);
  Placer1 p;
  p.placeable = {3, 4};
  auto fx = life.schedule(1060, p);
  ASSERT_EQ(fx.starts.size(), 2u);
  EXPECT_EQ(fx.starts[0].job, 3);
  // Without decay user 1's 100 GPU-s weigh more than user 2's 50: user 2 goes first.
  c.fair_share_half_life_s = 0;
  auto flat = make(c);
  flat.submitted(job(1, 1), false, false, 0);
  run(flat, 1, 0, 100, 40960);
  flat.submitted(job(2, 2), false, false, 1000);
  run(flat, 2, 1000, 1050, 40960);
  flat.submitted(job(3, 1), false, false, 1050);
  flat.submitted(job(4, 2), false, false, 1050);
  EXPECT_EQ(flat.queue_order(), (std::vector<JobId>{4, 3}));  // as of the last pass (t 1000)
  Placer1 q;
  q.placeable = {3, 4};
  fx = flat.schedule(1060, q);
  ASSERT_EQ(fx.starts.size(), 2u);
  EXPECT_EQ(fx.starts[0].job, 4);
}

TEST(FairShare, ACappedUsersJobIsPassedOverWithoutBlockingOthers) {
  EngineConfig c;
  c.user_max_running_jobs = 1;
  auto life = make(c);  // strict head-of-line
  life.submitted(job(1, 1), false, false, 0);
  life.submitted(job(2, 1), false, false, 1);
  life.submitted(job(3, 2), false, false, 2);
  Placer1 p;
  p.placeable = {1, 2, 3};
  auto fx = life.schedule(10, p);
  ASSERT_EQ(fx.starts.size(), 2u);
  EXPECT_EQ(fx.starts[0].job, 1);
  EXPECT_EQ(fx.starts[1].job, 3);
  EXPECT_EQ(life.find(2)->state, JobState::Queued);
  EXPECT_NE(life.find(2)->reason.find("user_max_running_jobs = 1"), std::string::npos) << life.find(2)->reason;
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 2);
  // Its user's job ends: it starts.
  life.ended(1, {AttemptOutcome::Completed, ""}, 20);
  fx = life.schedule(20, p);
  ASSERT_EQ(fx.starts.size(), 1u);
  EXPECT_EQ(fx.starts[0].job, 2);
}

TEST(FairShare, AMemoryCapCountsTheBookedMemoryOfTheUsersRunningJobs) {
  EngineConfig c;
  c.user_max_gpu_mem_mib = 15000;
  auto life = make(c);
  for (JobId i = 1; i <= 3; ++i) life.submitted(job(i, i == 3 ? 2 : 1), false, false, static_cast<Seconds>(i));
  Placer1 p;
  p.placeable = {1, 2, 3};
  p.admitted = 10240;  // two would book 20480 MiB > 15000
  auto fx = life.schedule(10, p);
  ASSERT_EQ(fx.starts.size(), 2u);
  EXPECT_EQ(fx.starts[0].job, 1);
  EXPECT_EQ(fx.starts[1].job, 3);
  EXPECT_NE(life.find(2)->reason.find("user_max_gpu_mem_mib = 15000"), std::string::npos) << life.find(2)->reason;
}

TEST(FairShare, BadWeightsAreOneLineNamingTheField) {
  EngineConfig c;
  for (const char* bad : {"alice", "alice:0", "alice:x", "alice:1,,bob:2", "alice:1,alice:2", ":3"}) {
    try {
      set_param(c, "fair_share_users", bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("fair_share_users"), std::string::npos) << e.what();
    }
  }
  set_param(c, "fair_share_groups", "lab:2, *:1");
  const auto w = parse_share_weights(c.fair_share_groups, "fair_share_groups");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].first, "lab");
  EXPECT_EQ(w[1].second, 1.0);
}

// Without group weights the groups do not count: users each in a group of their own (a
// group per user, the Debian default) still get shares by their user weights.
TEST(FairShare, WithoutGroupWeightsUsersOfDifferentGroupsShareByTheirWeights) {
  EngineConfig c;
  c.fair_share_users = "1:2,2:1";
  FairShare fs(c, resolve_share_weights(c, [](std::string_view n, bool) -> std::optional<std::int64_t> {
                 return std::stoll(std::string(n));
               }));
  for (std::int64_t u : {1, 2}) {
    fs.started(u, 1000 + u, {{0, 0, 40960, 40960, false}}, 0);  // group 1001 and group 1002
    fs.stopped(u, {{0, 0, 40960, 40960, false}}, 100);
  }
  const auto f = fs.factors(100);
  EXPECT_NEAR(f.at(1), std::exp2(-0.5 / (2.0 / 3)), 1e-9);
  EXPECT_NEAR(f.at(2), std::exp2(-0.5 / (1.0 / 3)), 1e-9);
}

TEST(FairShare, GroupWeightsSplitBetweenGroupsThenTheirUsers) {
  EngineConfig c;
  c.fair_share_groups = "10:2,20:1";
  FairShare fs(c, resolve_share_weights(c, [](std::string_view n, bool) -> std::optional<std::int64_t> {
                 return std::stoll(std::string(n));
               }));
  fs.seen(1, 10);
  fs.seen(2, 10);
  fs.seen(3, 20);
  // Equal usage for all three: group 10's two users share 2/3, user 3 alone has 1/3.
  for (std::int64_t u : {1, 2, 3}) {
    fs.started(u, u == 3 ? 20 : 10, {{0, 0, 40960, 40960, false}}, 0);
    fs.stopped(u, {{0, 0, 40960, 40960, false}}, 100);
  }
  const auto f = fs.factors(100);
  EXPECT_NEAR(f.at(1), std::exp2(-(1.0 / 3) / (1.0 / 3)), 1e-9);
  EXPECT_NEAR(f.at(3), std::exp2(-(1.0 / 3) / (1.0 / 3)), 1e-9);
  EXPECT_DOUBLE_EQ(f.at(1), f.at(2));
}

// Each user's charge from 0 to `end` of a simulator run, by the ledger itself (no decay):
// its attempts clipped to `end`, replayed under `charge` (booked or occupied).
std::map<std::int64_t, double> window_charge(const SimResult& r, const std::string& charge, Seconds end) {
  EngineConfig c;
  c.fair_share_users = "*:1";
  c.fair_share_half_life_s = 0;
  c.fair_share_charge = charge;
  FairShare ledger(c, {});
  std::vector<PastHold> attempts;
  for (const auto& j : r.jobs)
    for (const auto& a : j.attempts)
      if (a.launch < end) {
        PastHold h{j.trace_index % 2, 0, {}, a.launch, std::min(a.end, end)};
        for (int g : a.gpus) h.gpus.push_back({0, g, a.admitted_mib, 40960, a.exclusive});
        attempts.push_back(std::move(h));
      }
  ledger.rebuild(std::move(attempts));
  return {{0, ledger.charged(0, end)}, {1, ledger.charged(1, end)}};
}

// The study of docs/lab-policies.md in small, through the simulator: two users submit the
// same 60 published jobs in interleaved bursts on the published testbed (3 x 40 GiB); while
// both still have jobs waiting, weights 2:1 give them charged GPU shares within 10 % of 2:1,
// and no weights about 1:1, each measured by the charge the scheduler makes. The simulator
// also reports each user's charge.
double burst_ratio(const std::string& policy, const std::string& weights, const std::string& charge, SimResult* out,
                   std::uint64_t seed = 1, const std::string& committed = "mean_run_time") {
  const std::string data = std::string(AEGIS_SOURCE_DIR) + "/data/aegis/";
  const auto catalog = WorkloadCatalog::load(data + "workloads.csv");
  const Trace published = load_trace(data + "trace_philly.csv", catalog);
  Trace two = published;
  two.jobs.clear();
  two.user_names = {"alice", "bob"};
  for (std::size_t k = 0; k < published.jobs.size(); ++k)
    for (std::int32_t u : {0, 1}) {
      TraceJob j = published.jobs[k];
      j.index = static_cast<std::int64_t>(two.jobs.size());
      j.submit_time = static_cast<double>(k) + 0.5 * u;
      j.owner = u;
      two.jobs.push_back(j);
    }
  SimOptions o;
  o.policy_name = policy;
  o.engine = policy_config(policy);
  o.engine.fair_share_users = weights;
  o.engine.fair_share_charge = charge;
  o.engine.fair_share_committed = committed;
  o.seed = seed;  // first-activity delays and telemetry noise
  // (ClusterSpec's default: one server of 3 x 40960 MiB, the published testbed.)
  const SimResult r = simulate(catalog, two, o);
  double end = 1e300;  // up to the first launch of the last job of the user whose queue empties first
  for (std::int32_t u : {0, 1}) {
    double last = 0;
    for (const auto& j : r.jobs)
      if (j.trace_index % 2 == u) last = std::max(last, j.first_launch);
    end = std::min(end, last);
  }
  const auto charged = window_charge(r, charge, end);
  if (out) *out = r;
  return charged.at(0) / charged.at(1);
}

TEST(FairShare, TwoUsersBurstsGetSharesByTheirWeightsInTheSimulator) {
  SimResult weighted;
  EXPECT_NEAR(burst_ratio("exclusive", "alice:2,bob:1", "booked", &weighted), 2.0, 0.2);
  EXPECT_NEAR(burst_ratio("exclusive", "", "booked", nullptr), 1.0, 0.1);
  ASSERT_EQ(weighted.user_gpu_seconds.size(), 2u);
  EXPECT_EQ(weighted.user_gpu_seconds[0].first, "alice");
  EXPECT_GT(weighted.user_gpu_seconds[1].second, 0);
}

// Under `aegis` with seed 2 and Slurm's classic factor (committed none) the booked charge
// misses 2:1 by far (1.35): GPUs held by one user's small bookings, which the gates and
// head-of-line keep others off, are charged only in part. Charged by the GPU time each
// user's jobs occupy, it holds (the study's figures, docs/lab-policies.md: 1.86, and 1.91
// with the default committed usage).
TEST(FairShare, TwoUsersBurstsGetSharesByTheirWeightsUnderSharingWhenChargedByOccupiedGpus) {
  EXPECT_NEAR(burst_ratio("aegis", "alice:2,bob:1", "occupied", nullptr, 2), 2.0, 0.2);
  EXPECT_NEAR(burst_ratio("aegis", "alice:2,bob:1", "occupied", nullptr, 2, "none"), 2.0, 0.2);
  EXPECT_LT(burst_ratio("aegis", "alice:2,bob:1", "booked", nullptr, 2, "none"), 1.8);  // the miss it fixes
}

// Under profiled peaks (`aegis-peak`) with Slurm's classic factor the order turns too late:
// a user served when due starts a whole-GPU job of four hours and six more behind it in the
// same minutes, while his factor still says he is due (the study's seed 1: 1.74). Counting
// what running jobs are committed to (the rest of the mean run time) holds 2:1 (1.95).
TEST(FairShare, TwoUsersBurstsGetSharesByTheirWeightsUnderProfiledPeaksWhenCommittedUsageCounts) {
  EXPECT_NEAR(burst_ratio("aegis-peak", "alice:2,bob:1", "occupied", nullptr, 1), 2.0, 0.2);
  EXPECT_LT(burst_ratio("aegis-peak", "alice:2,bob:1", "occupied", nullptr, 1, "none"), 1.8);
}

}  // namespace
}  // namespace aegis
