// The engine's answer for one job: exclusive-first, orders, multi-GPU jobs, the
// recovery rule, jobs no GPU can hold. The queues (order, head-of-line, failures requeued)
// are the lifecycle's: tests/test_lifecycle_queue.cpp.
#include <gtest/gtest.h>
#include <random>

#include "tests/engine_fixture.h"

namespace aegis {
namespace {

using test::World;

TEST(Engine, ExclusiveFirstTakesIdleGpusWithoutFilters) {
  // GPU 0 shares well (low pressure, lots of memory); GPU 1 is idle but its window still
  // shows its last job's activity. Exclusive-first gives the idle GPU to the job.
  World w(2);
  w.run(1, {0}, 1000);
  w.busy(1, 1, 1, 1);
  const QueuedJob j = test::job(2);
  auto d = w.tick(test::engine("aegis"), j);
  ASSERT_EQ(d.launches.size(), 1u);
  EXPECT_EQ(d.launches[0].gpus, std::vector<int>{1});
  EXPECT_FALSE(d.launches[0].exclusive);  // others may join later

  // Without exclusive-first the pressure filter rules GPU 1 out and MAGM takes GPU 0.
  d = w.tick(test::engine("aegis", [](EngineConfig& c) { c.exclusive_first = false; }), j);
  ASSERT_EQ(d.launches.size(), 1u);
  EXPECT_EQ(d.launches[0].gpus, std::vector<int>{0});
}

TEST(Engine, NoJobNoAnswer) {
  World w(1);
  Snapshot s = w.snapshot_of(test::job(1));
  s.job = nullptr;
  const Decisions d = test::engine("aegis").tick(s);
  EXPECT_TRUE(d.launches.empty());
  EXPECT_TRUE(d.stops.empty());
  EXPECT_FALSE(d.blocked);
}

TEST(Engine, RecoveryFloorRaisesTheRequirement) {
  World w(1);
  w.run(1, {0}, 25000);  // 15960 free, 15448 after the guard
  QueuedJob r = test::job(2);
  r.recovery.floor_mib = 18432;
  EXPECT_TRUE(w.tick(test::engine("aegis"), r).launches.empty());
  r.recovery.floor_mib = 10240;
  EXPECT_EQ(w.tick(test::engine("aegis"), r).launches.size(), 1u);
}

TEST(Engine, ExclusiveOnlyJobsWaitForIdleGpusAndBlockJoiners) {
  World w(2);
  w.run(1, {0}, 1000);
  QueuedJob r = test::job(2);
  r.recovery.exclusive_only = true;
  auto d = w.tick(test::engine("aegis"), r);
  ASSERT_EQ(d.launches.size(), 1u);
  EXPECT_EQ(d.launches[0].gpus, std::vector<int>{1});
  EXPECT_TRUE(d.launches[0].exclusive);

  // A GPU running an exclusive job takes no one else.
  World w2(1);
  w2.run(1, {0}, 1000).exclusive = true;
  d = w2.tick(test::engine("aegis"), test::job(3));
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.blocked);
  EXPECT_NE(d.blocked->reason.find("gpu0: exclusive: a job placed to run alone holds it"), std::string::npos)
      << d.blocked->reason;
}

TEST(Engine, MultiGpuJobNeedsEveryGpuToPass) {
  World w(3);
  w.run(1, {0}, 1000);
  w.run(2, {1}, 1000);
  w.run(3, {2}, 1000);
  w.busy(1, 0.9, 0.9, 0.9);  // GPU 1 is under pressure
  const QueuedJob j = test::job(4, 2);
  auto d = w.tick(test::engine("aegis"), j);
  ASSERT_EQ(d.launches.size(), 1u);
  EXPECT_EQ(d.launches[0].gpus, (std::vector<int>{0, 2}));
  w.busy(2, 0.9, 0.9, 0.9);
  d = w.tick(test::engine("aegis"), j);
  EXPECT_TRUE(d.launches.empty());
}

TEST(Engine, Orders) {
  auto place = [](const std::string& order) {
    World w(4);
    w.run(1, {0}, 20000);
    w.run(2, {1}, 5000);
    w.run(3, {2}, 30000);
    w.run(4, {3}, 10000);
    w.busy(0, 0.1, 0, 0);
    w.busy(1, 0.5, 0, 0);
    w.busy(2, 0.3, 0, 0);
    w.busy(3, 0.2, 0, 0);
    w.state.rr_cursor = 1;
    EngineConfig c = policy_config("aegis");
    c.order = order;
    const auto d = w.tick(Engine(c), test::job(9));
    return d.launches.at(0).gpus.at(0);
  };
  EXPECT_EQ(place("magm"), 1);  // most free memory
  EXPECT_EQ(place("bf"), 2);    // least free memory that fits
  EXPECT_EQ(place("lug"), 0);   // lowest SM activity
  EXPECT_EQ(place("ff"), 0);
  EXPECT_EQ(place("rr"), 2);    // after the cursor (GPU 1)
}

// aegis-learned ranks shared GPUs by their jobs' predicted utilisation, combined by the
// union rule: GPU 0 (most free memory, MAGM's choice) runs a job predicted at 0.9; GPU 1
// two jobs at 0.3 (union 0.51, sum 0.6); GPU 2 one at 0.55. The least predicted activity
// is GPU 1's, where a sum would have chosen GPU 2; without predictions every GPU counts as
// busy and MAGM's order decides.
TEST(Engine, LeastPredictedActivityRanksByTheUnionOfPredictions) {
  auto place = [](const std::string& policy, bool predicted) {
    World w(3);
    auto with = [&](RunningJob& r, double u) {
      if (predicted) r.spec.predicted_util = u;
    };
    with(w.run(1, {0}, 2000), 0.9);
    with(w.run(2, {1}, 4000), 0.3);
    with(w.run(3, {1}, 4000), 0.3);
    with(w.run(4, {2}, 6000), 0.55);
    auto newcomer = test::job(9);
    newcomer.spec.predicted_util = 0.5;
    const auto d = w.tick(test::engine(policy), newcomer);
    return d.launches.at(0).gpus.at(0);
  };
  EXPECT_EQ(place("aegis-learned", true), 1);
  EXPECT_EQ(place("aegis", true), 0);           // MAGM reads no prediction
  EXPECT_EQ(place("aegis-learned", false), 0);  // no predictions: MAGM's order
}

// The recovery rule, as the lifecycle asks it (Engine::recover): an OOM is requeued with
// a floor, another failure stops the job with its detail. (That a requeued job is placed
// in the same pass: tests/test_lifecycle_queue.cpp.)
TEST(Engine, RecoverClassifiesFailures) {
  const Engine e = test::engine("aegis");
  RunningJob gone;
  gone.spec.id = 5;
  gone.gpu_total_mib = 40960;
  gone.free_at_placement = 12000;
  const auto oom = e.recover({gone, FailureKind::Oom, "CUDA out of memory"});
  ASSERT_TRUE(std::holds_alternative<Requeue>(oom));
  EXPECT_EQ(std::get<Requeue>(oom).job, 5);
  EXPECT_EQ(std::get<Requeue>(oom).recovery.floor_mib, 18432);
  RunningJob broken = gone;
  broken.spec.id = 6;
  const auto other = e.recover({broken, FailureKind::Other, "exit status 2"});
  ASSERT_TRUE(std::holds_alternative<Stop>(other));
  EXPECT_EQ(std::get<Stop>(other).job, 6);
  EXPECT_EQ(std::get<Stop>(other).reason, "exit status 2");
}

TEST(Engine, LucidPairsBySharingScoreAndGpuCount) {
  World w(1);
  auto& r = w.run(1, {0}, 8000);
  r.spec.hints.sharing_score = 1;
  r.spec.estimates.profiled = 8000;
  QueuedJob j = test::job(2, 1, 8000);
  j.spec.hints.sharing_score = 1;
  EXPECT_EQ(w.tick(test::engine("lucid"), j).launches.size(), 1u);
  j.spec.hints.sharing_score = 2;  // 1 + 2 > 2
  auto d = w.tick(test::engine("lucid"), j);
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.blocked);
  EXPECT_NE(d.blocked->reason.find("gpu0: sharing-score: scores 1 there + 2 > 2"), std::string::npos)
      << d.blocked->reason;
  j.spec.hints.sharing_score = 0;
  j.spec.estimates.profiled = 33000;  // 8000 + 33000 > 40448
  d = w.tick(test::engine("lucid"), j);
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.blocked);
  EXPECT_NE(d.blocked->reason.find("gpu0: memory: needs 33000 MiB, 32448 free"), std::string::npos)
      << d.blocked->reason;
}

TEST(Engine, LucidAtMostTwoJobsPerGpu) {
  World w(1);
  for (JobId i = 1; i <= 2; ++i) {
    auto& r = w.run(i, {0}, 1000);
    r.spec.hints.sharing_score = 0;
  }
  QueuedJob j = test::job(3, 1, 1000);
  j.spec.hints.sharing_score = 0;
  const auto d = w.tick(test::engine("lucid"), j);
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.blocked);
  EXPECT_NE(d.blocked->reason.find("gpu0: job-count: 2 jobs there, at most 2"), std::string::npos) << d.blocked->reason;
}

TEST(Engine, HorusCapsProfiledUtilisation) {
  World w(2);
  auto& a = w.run(1, {0}, 1000);
  a.spec.hints.gpu_util = 0.6;
  auto& b = w.run(2, {1}, 1000);
  b.spec.hints.gpu_util = 0.3;
  QueuedJob j = test::job(3);
  j.spec.estimates.analytical = 4000;
  j.spec.hints.gpu_util = 0.5;
  auto d = w.tick(test::engine("horus"), j);
  ASSERT_EQ(d.launches.size(), 1u);
  EXPECT_EQ(d.launches[0].gpus, std::vector<int>{1});  // 0.3 + 0.5 <= 1; 0.6 + 0.5 > 1
  j.spec.hints.gpu_util = 0.8;
  d = w.tick(test::engine("horus"), j);
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.blocked);
  EXPECT_NE(d.blocked->reason.find("gpu0: util-cap: utilisation 0.60 there + 0.80 > 1.00; "
                                   "gpu1: util-cap: utilisation 0.30 there + 0.80 > 1.00"),
            std::string::npos)
      << d.blocked->reason;
}

TEST(Engine, JobLargerThanServerIsReportedNotPlaced) {
  World w(2);
  const auto d = w.tick(test::engine("aegis"), test::job(1, 3));
  EXPECT_TRUE(d.launches.empty());
  EXPECT_NE(d.blocked->reason.find("needs 3 GPUs; this server has 2"), std::string::npos);
}


TEST(Engine, ExclusiveFirstSkipsIdleGpusTooSmallForTheEstimate) {
  World w(2);
  w.gpus[0].total_mib = w.gpus[0].free_mib = 40960;
  w.gpus[1].total_mib = w.gpus[1].free_mib = 81920;
  const QueuedJob j = test::job(1, 1, 60000);
  auto d = w.tick(test::engine("aegis-peak"), j);
  ASSERT_EQ(d.launches.size(), 1u);
  EXPECT_EQ(d.launches[0].gpus, std::vector<int>{1});
  // Without an estimate nothing tells them apart: first in order (MAGM: the larger one).
  d = w.tick(test::engine("exclusive"), j);
  EXPECT_EQ(d.launches.size(), 1u);
}


TEST(Engine, RequestShapeCoversWhatThePolicyReads) {
  QueuedJob a = test::job(1, 1, 8000), b = test::job(2, 1, 12000);
  b.spec.name = "other";
  const Engine free = test::engine("aegis"), peak = test::engine("aegis-peak"), lucid = test::engine("lucid");
  auto same = [](const Engine& e, const QueuedJob& x, const QueuedJob& y) {
    return e.request_shape(x).covers(e.request_shape(y)) && e.request_shape(y).covers(e.request_shape(x));
  };
  EXPECT_TRUE(same(free, a, b));  // estimator-free: estimates unread
  EXPECT_FALSE(same(peak, a, b));
  EXPECT_TRUE(peak.request_shape(b).covers(peak.request_shape(a)));  // needs more: refused where a was
  EXPECT_FALSE(peak.request_shape(a).covers(peak.request_shape(b)));
  EXPECT_EQ(peak.request_shape(b).need_shared, 12000 + 2048);
  EXPECT_EQ(peak.request_shape(b).need_alone, 12000);
  b.spec.estimates.profiled = 8000;
  b.spec.hints.sharing_score = 0;
  EXPECT_TRUE(same(peak, a, b));
  EXPECT_FALSE(same(lucid, a, b));
  // Hints that every stage reading them takes as a need compare as figures: a job that
  // shares less (a higher score; none counts as 2) is refused wherever one sharing more was.
  EXPECT_TRUE(lucid.request_shape(a).covers(lucid.request_shape(b)));
  EXPECT_FALSE(lucid.request_shape(b).covers(lucid.request_shape(a)));
  b.spec.hints.sharing_score = 2;
  EXPECT_TRUE(same(lucid, a, b));
  const Engine horus = test::engine("horus");
  QueuedJob light = a, heavy = a;
  light.spec.hints.gpu_util = 0.3;
  heavy.spec.hints.gpu_util = 0.6;
  EXPECT_TRUE(horus.request_shape(heavy).covers(horus.request_shape(light)));
  EXPECT_FALSE(horus.request_shape(light).covers(horus.request_shape(heavy)));
  EXPECT_TRUE(horus.request_shape(a).covers(horus.request_shape(heavy)));  // none counts as 1
  b = a;
  b.recovery.floor_mib = 10240;
  EXPECT_FALSE(same(free, a, b));
  EXPECT_TRUE(free.request_shape(b).covers(free.request_shape(a)));
  b = a;
  b.spec.num_gpus = 2;
  EXPECT_FALSE(free.request_shape(b).covers(free.request_shape(a)));
}


TEST(StageReads, AFieldStaysANeedOnlyIfEveryReaderSaysSo) {
  const StageReads as_need{{JobField::GpuUtilHint}, {GpuFact::Jobs}, {JobField::GpuUtilHint}};
  const StageReads as_value{{JobField::GpuUtilHint, JobField::GpuCount}, {}};
  const StageReads elsewhere{{JobField::GpuCount}, {GpuFact::Memory}};
  StageReads r = as_need;
  r |= elsewhere;  // reads the hint not at all: it stays a need
  EXPECT_TRUE(r.is_need(JobField::GpuUtilHint));
  r |= as_value;   // reads it as a value: compared by equality from now on
  EXPECT_TRUE(r.has(JobField::GpuUtilHint));
  EXPECT_FALSE(r.is_need(JobField::GpuUtilHint));
  r = as_value;
  r |= as_need;    // in either order
  EXPECT_FALSE(r.is_need(JobField::GpuUtilHint));
  // A need must be read.
  EXPECT_FALSE((StageReads{{}, {}, {JobField::SharingScoreHint}}).is_need(JobField::SharingScoreHint));
}

TEST(Engine, StopsJobsNoGpuHereCanHold) {
  // After an OOM alone on a 40 GiB GPU the job may only go to a larger GPU; there is none.
  // (That the queue then moves on: tests/test_lifecycle_queue.cpp.)
  World w(2);
  QueuedJob j = test::job(1);
  j.recovery.exclusive_only = true;
  j.recovery.floor_mib = 40449;
  const auto d = w.tick(test::engine("aegis"), j);
  ASSERT_EQ(d.stops.size(), 1u);
  EXPECT_EQ(d.stops[0].job, 1);
  EXPECT_NE(d.stops[0].reason.find("needs 40449 MiB on a GPU alone"), std::string::npos);
  EXPECT_TRUE(d.launches.empty());
  // With a larger GPU it waits for it and runs there.
  World big(2);
  big.gpus[1].total_mib = big.gpus[1].free_mib = 81920;
  const auto d2 = big.tick(test::engine("aegis"), j);
  ASSERT_EQ(d2.launches.size(), 1u);
  EXPECT_EQ(d2.launches[0].gpus, std::vector<int>{1});
}


// Engine::room_refuses lets the simulator skip asks; it must never say "refused" where a
// tick would place the job, and the time it names to ask again must be no later than the
// tick's. Random servers (jobs of random sizes, some exclusive, some still observed, some
// telemetry) and random requests at random instants, under every policy whose engine
// tells refusals from a room: wherever the room refuses, the tick refuses too, and the
// room tells a good share of the tick's refusals, or it saves nothing.
TEST(Room, RefusesOnlyWhatATickRefuses) {
  std::mt19937_64 rng(7);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int policies_told = 0;
  for (const char* policy : {"exclusive", "aegis", "aegis-peak", "aegis-horus", "carma", "lucid", "horus", "naive"}) {
    const Engine e = test::engine(policy);
    if (!e.tells_refusals_from_room()) continue;
    ++policies_told;
    int room_refused = 0, tick_refused = 0, placed = 0, woken = 0;
    for (int trial = 0; trial < 600; ++trial) {
      test::World w(8);
      w.now = 1000;
      JobId id = 100;
      for (int k = uniform(0, 12); k > 0; --k) {
        std::vector<int> on;
        const int n = uniform(1, 2);
        for (int g = uniform(0, 7); static_cast<int>(on.size()) < n; g = (g + 1) % 8) on.push_back(g);
        const MiB used = uniform(1, 20) * 1024;
        if (w.gpus[on[0]].free_mib < used || (on.size() > 1 && w.gpus[on[1]].free_mib < used)) continue;
        // Some jobs are still observed (gate shut), some show no activity yet.
        const bool active = uniform(0, 3) > 0;
        RunningJob& r = w.run(id++, on, used, w.now - uniform(0, 400),
                              active ? std::optional<Seconds>(w.now - uniform(0, 400)) : std::nullopt);
        r.spec.estimates.profiled = used;
        r.exclusive = uniform(0, 9) == 0;
        if (uniform(0, 1)) r.spec.hints.sharing_score = uniform(0, 2);
        for (int g : on) w.busy(g, uniform(0, 10) / 10.0, uniform(0, 10) / 10.0, uniform(0, 10) / 10.0, uniform(0, 10) / 10.0);
      }
      std::vector<GpuLoad> loads(w.gpus.size());
      for (const auto& r : w.running)
        for (int g : r.gpus) e.add_load(loads[static_cast<std::size_t>(g)], r);
      QueuedJob q = test::job(1, uniform(1, 8), uniform(0, 4) ? std::optional<MiB>(uniform(1, 40) * 1024) : std::nullopt);
      q.recovery.floor_mib = uniform(0, 3) == 0 ? uniform(1, 40) * 1024 : 0;
      q.recovery.exclusive_only = uniform(0, 5) == 0;
      if (uniform(0, 1)) q.spec.hints.sharing_score = uniform(0, 2);
      Engine::Room room;
      ASSERT_TRUE(e.room(w.gpus, loads, room));
      w.now += uniform(0, 1) ? 0 : uniform(0, 900);  // a room outlives instants: gates open as time passes
      Snapshot s = w.snapshot_of(q);
      s.loads = loads;
      const Decisions d = e.tick(s);
      Seconds wake = 0;
      const bool refuses = e.room_refuses(room, e.request_shape(q), q.spec.num_gpus, w.now, wake);
      if (refuses) {
        ++room_refused;
        EXPECT_TRUE(d.launches.empty()) << policy << ": the room refused a job the tick placed (trial " << trial << ")";
        if (d.wake_at) {
          ++woken;
          EXPECT_LE(wake, *d.wake_at) << policy << ": the room names a later time to ask again (trial " << trial << ")";
        }
      }
      if (d.launches.empty()) ++tick_refused;
      else ++placed;
    }
    // Not vacuous: both answers occur, and the room tells a share of the refusals.
    EXPECT_GT(placed, 60) << policy;
    EXPECT_GT(room_refused, tick_refused / 4) << policy;
    if (e.config().observation) {
      EXPECT_GT(woken, 5) << policy;
    }
  }
  EXPECT_GE(policies_told, 5);  // the aegis family, carma, lucid, horus, naive collocate
}

// A room summarised again only where GPUs changed (room_update, as the simulator's
// dispatcher keeps one per server) equals one filled whole: random jobs come and go on
// random GPUs, each change marking the GPUs it touched.
TEST(Room, UpdatedWhereChangedEqualsFilledWhole) {
  std::mt19937_64 rng(5);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (const char* policy : {"aegis", "aegis-peak", "carma", "lucid", "naive"}) {
    const Engine e = test::engine(policy);
    if (!e.tells_refusals_from_room()) continue;
    test::World w(8);
    w.now = 1000;
    Engine::Room kept;
    ASSERT_TRUE(e.room(w.gpus, std::vector<GpuLoad>(8), kept));
    JobId id = 100;
    for (int step = 0; step < 400; ++step) {
      std::uint64_t changed = 0;
      if (!w.running.empty() && uniform(0, 2) == 0) {  // a job ends
        const auto k = static_cast<std::size_t>(uniform(0, static_cast<int>(w.running.size()) - 1));
        for (int g : w.running[k].gpus) {
          w.gpus[static_cast<std::size_t>(g)].free_mib += w.running[k].admitted_mib;
          w.gpus[static_cast<std::size_t>(g)].process_count -= w.running[k].first_activity ? 1 : 0;
          changed |= std::uint64_t{1} << g;
        }
        w.running.erase(w.running.begin() + static_cast<std::ptrdiff_t>(k));
      } else {  // a job starts, some with activity (their gates move)
        std::vector<int> on;
        const int n = uniform(1, 2);
        for (int g = uniform(0, 7); static_cast<int>(on.size()) < n; g = (g + 1) % 8) on.push_back(g);
        const MiB used = uniform(1, 8) * 1024;
        if (w.gpus[static_cast<std::size_t>(on[0])].free_mib < used ||
            (on.size() > 1 && w.gpus[static_cast<std::size_t>(on[1])].free_mib < used))
          continue;
        RunningJob& r = w.run(id++, on, used, w.now - uniform(0, 400),
                              uniform(0, 1) ? std::optional<Seconds>(w.now - uniform(0, 400)) : std::nullopt);
        r.admitted_mib = used;
        r.exclusive = uniform(0, 9) == 0;
        for (int g : on) changed |= std::uint64_t{1} << g;
      }
      std::vector<GpuLoad> loads(w.gpus.size());
      for (const auto& r : w.running)
        for (int g : r.gpus) e.add_load(loads[static_cast<std::size_t>(g)], r);
      ASSERT_TRUE(e.room_update(w.gpus, loads, changed, kept));
      Engine::Room whole;
      ASSERT_TRUE(e.room(w.gpus, loads, whole));
      ASSERT_EQ(kept.gpus.size(), whole.gpus.size());
      for (std::size_t g = 0; g < whole.gpus.size(); ++g) {
        EXPECT_EQ(kept.gpus[g].free, whole.gpus[g].free) << policy << " step " << step << " GPU " << g;
        EXPECT_EQ(kept.gpus[g].idle, whole.gpus[g].idle) << policy << " step " << step << " GPU " << g;
        EXPECT_EQ(kept.gpus[g].exclusive, whole.gpus[g].exclusive) << policy << " step " << step << " GPU " << g;
        EXPECT_EQ(kept.gpus[g].gate_opens_at, whole.gpus[g].gate_opens_at) << policy << " step " << step;
      }
      EXPECT_EQ(kept.most_free, whole.most_free) << policy << " step " << step;
      EXPECT_EQ(kept.most_idle_free, whole.most_idle_free) << policy << " step " << step;
      EXPECT_EQ(kept.idle, whole.idle) << policy << " step " << step;
    }
  }
}

TEST(Room, TellsSharingAloneAndGatesApart) {
  const Engine e = test::engine("aegis-peak");
  test::World w(3);
  w.run(10, {0}, 30 * 1024);                    // GPU 0 has ~10 GiB left
  w.run(11, {2}, 1024, w.now - 5, w.now - 5);   // GPU 2: plenty left, gate shut (active 5 s)
  std::vector<GpuLoad> loads(3);
  for (const auto& r : w.running) e.add_load(loads[static_cast<std::size_t>(r.gpus[0])], r);
  Engine::Room room;
  ASSERT_TRUE(e.room(w.gpus, loads, room));
  Seconds wake = 0;
  const auto refuses = [&](MiB est, int n, Seconds now) {
    return e.room_refuses(room, e.request_shape(test::job(1, n, est)), n, now, wake);
  };
  EXPECT_FALSE(refuses(20 * 1024, 1, w.now));  // GPU 1, idle, takes it
  // Too large to share any GPU (the margin on top), small enough for the idle one alone.
  EXPECT_FALSE(refuses(39 * 1024, 1, w.now));
  EXPECT_GT(e.request_shape(test::job(1, 1, 39 * 1024)).need_shared, room.gpus[1].free);
  EXPECT_FALSE(refuses(4 * 1024, 2, w.now));   // GPUs 0 and 1: a tick must tell
  EXPECT_TRUE(refuses(20 * 1024, 2, w.now));   // GPU 1 holds it, GPU 2 would but its gate is shut ...
  EXPECT_EQ(wake, room.gpus[2].gate_opens_at);  // ... until then
  EXPECT_GT(wake, w.now);
  EXPECT_FALSE(refuses(20 * 1024, 2, wake));    // then the room cannot tell
  EXPECT_TRUE(refuses(45 * 1024, 1, w.now));   // more than any GPU offers
  EXPECT_EQ(wake, std::numeric_limits<Seconds>::infinity());
  // An engine that does not collocate tells nothing from a room.
  EXPECT_FALSE(test::engine("exclusive").tells_refusals_from_room());
}


// With the pressure filter last and an order that ranks each GPU alone, a tick asks the
// pressure filter GPU by GPU in rank order until enough pass (Engine::tick). It must pick
// what filtering every GPU would: a tick with explain (which asks every GPU) is the
// reference. Random busy servers, random requests, every policy with a pressure filter.
TEST(Engine, PressureAskedInRankOrderPicksAsAskingEveryGpu) {
  std::mt19937_64 rng(11);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int compared = 0, placed = 0, by_pressure = 0;
  for (const char* policy : {"aegis", "aegis-peak", "aegis-horus", "carma", "aegis-learned"}) {
    const Engine e = test::engine(policy);
    for (int trial = 0; trial < 300; ++trial) {
      test::World w(8);
      w.now = 1000;
      for (int k = uniform(0, 10), id = 100; k > 0; --k, ++id) {
        const int g = uniform(0, 7);
        RunningJob& r = w.run(id, {g}, uniform(1, 8) * 1024, 0, 1.0);
        r.spec.predicted_util = uniform(0, 10) / 10.0;
      }
      for (int g = 0; g < 8; ++g)  // mostly busy: the pressure filter decides often
        w.busy(g, uniform(4, 10) / 10.0, uniform(2, 10) / 10.0, uniform(2, 10) / 10.0, uniform(2, 10) / 10.0);
      QueuedJob q = test::job(1, uniform(1, 4), std::optional<MiB>(uniform(1, 20) * 1024));
      Snapshot s = w.snapshot_of(q);
      s.explain = true;
      const Decisions all = e.tick(s);
      s.explain = false;
      const Decisions lazy = e.tick(s);
      ++compared;
      ASSERT_EQ(all.launches.size(), lazy.launches.size()) << policy << " trial " << trial;
      if (!all.launches.empty()) {
        ++placed;
        EXPECT_EQ(all.launches[0].gpus, lazy.launches[0].gpus) << policy << " trial " << trial;
        EXPECT_EQ(all.state.rr_cursor, lazy.state.rr_cursor) << policy << " trial " << trial;
      }
      ASSERT_EQ(all.blocked.has_value(), lazy.blocked.has_value()) << policy << " trial " << trial;
      if (all.blocked) {
        EXPECT_EQ(all.blocked->by_pressure, lazy.blocked->by_pressure) << policy << " trial " << trial;
        EXPECT_EQ(all.blocked->pressure_gpus, lazy.blocked->pressure_gpus) << policy << " trial " << trial;
        by_pressure += all.blocked->by_pressure ? 1 : 0;
      }
      EXPECT_EQ(all.wake_at, lazy.wake_at) << policy << " trial " << trial;
    }
  }
  // Not vacuous: placements among busy GPUs, and refusals by pressure.
  EXPECT_GT(placed, 300) << "placed";
  EXPECT_GT(by_pressure, 50) << "refused by pressure";
  EXPECT_EQ(compared, 1500);
}

}  // namespace
}  // namespace aegis
