// The stages one by one: memory feasibility, observation gate, pressure rule.
#include <gtest/gtest.h>

#include "tests/engine_fixture.h"

namespace aegis {
namespace {

using test::World;

// One GPU already holding a job, so exclusive-first does not apply and the filters decide.
World one_shared_gpu() {
  World w(1);
  w.run(1, {0}, 1000);
  return w;
}

TEST(MemoryFilter, EstimatorFreeFloorAfterGuard) {
  const Engine e = test::engine("aegis");
  // 512 MiB guard + 5120 MiB floor: 5632 MiB reported free is just enough.
  for (MiB free : {MiB{5631}, MiB{5632}}) {
    World w = one_shared_gpu();
    w.gpus[0].free_mib = free;
    const QueuedJob job = test::job(2);
    const auto d = w.tick(e, job);
    EXPECT_EQ(d.launches.size(), free >= 5632 ? 1u : 0u) << free;
    // The stage's own words: what it needs, what the GPU offers after the guard.
    if (d.blocked) {
      EXPECT_NE(d.blocked->reason.find("gpu0: memory: needs 5120 MiB, 5119 free"), std::string::npos)
          << d.blocked->reason;
    }
  }
}

TEST(MemoryFilter, EstimatePlusMargin) {
  const Engine e = test::engine("aegis-peak");
  for (MiB free : {MiB{12000 + 2048 + 512 - 1}, MiB{12000 + 2048 + 512}}) {
    World w = one_shared_gpu();
    w.gpus[0].free_mib = free;
    const QueuedJob job = test::job(2, 1, 12000);
    EXPECT_EQ(w.tick(e, job).launches.size(), free == 14560 ? 1u : 0u) << free;
  }
}

TEST(MemoryFilter, BookedEstimatesNeverExceedCapacity) {
  // The running job booked 30000 MiB but has allocated only 1000 so far: reported free
  // memory would admit a 20000 MiB job, booked memory does not.
  const Engine e = test::engine("aegis-peak");
  World w(1);
  auto& r = w.run(1, {0}, 1000);
  r.admitted_mib = 30000;
  const QueuedJob job = test::job(2, 1, 20000);
  EXPECT_TRUE(w.tick(e, job).launches.empty());
  // The estimator-free policy only sees reported memory.
  World w2(1);
  auto& r2 = w2.run(1, {0}, 1000);
  r2.admitted_mib = 30000;
  const QueuedJob job2 = test::job(2, 1, 20000);
  EXPECT_EQ(w2.tick(test::engine("aegis"), job2).launches.size(), 1u);
}

TEST(ObservationGate, ClosedUntilWindowAfterFirstActivity) {
  const Engine e = test::engine("aegis");
  auto at = [&](Seconds now, std::optional<Seconds> first_activity) {
    World w(1);
    w.now = now;
    w.run(1, {0}, 1000, /*launched=*/50, first_activity);
    const QueuedJob job = test::job(2);
    return w.tick(e, job);
  };
  // No activity yet: closed, and no wake time before the maximum wait.
  auto d = at(60, std::nullopt);
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.wake_at.has_value());
  EXPECT_DOUBLE_EQ(*d.wake_at, 50 + 300);
  // Active since 58: closed until 88.
  d = at(87.9, 58);
  EXPECT_TRUE(d.launches.empty());
  EXPECT_DOUBLE_EQ(*d.wake_at, 88);
  EXPECT_NE(d.blocked->reason.find("gpu0: observing: a new job is observed; open in 1 s"), std::string::npos)
      << d.blocked->reason;
  d = at(60, std::nullopt);
  EXPECT_NE(d.blocked->reason.find("gpu0: observing: a new job is observed; open in 290 s"), std::string::npos)
      << d.blocked->reason;
  EXPECT_EQ(at(88, 58).launches.size(), 1u);
  // After the maximum wait without activity the GPU opens anyway.
  EXPECT_EQ(at(350, std::nullopt).launches.size(), 1u);
}

TEST(ObservationGate, DriversAreToldWhenAFirstActivityOpensIt) {
  // What a driver that remembers refusals skips asking until (the simulator, at a job's
  // first activity): the time the engine's own refusal names.
  const Engine e = test::engine("aegis");
  World w(1);
  w.now = 58;
  w.run(1, {0}, 1000, /*launched=*/50, /*first_activity=*/58);
  const QueuedJob job = test::job(2);
  const auto d = w.tick(e, job);
  ASSERT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.wake_at && e.gate_opens_after_activity(58));
  EXPECT_DOUBLE_EQ(*e.gate_opens_after_activity(58), *d.wake_at);
  // No gate, nothing to wait for: naive has none, exclusive never shares a GPU.
  EXPECT_FALSE(test::engine("naive").gate_opens_after_activity(58));
  EXPECT_FALSE(test::engine("exclusive").gate_opens_after_activity(58));
  EXPECT_FALSE(test::engine("aegis", [](EngineConfig& c) { c.observation = false; }).gate_opens_after_activity(58));
}

// The published rule: exclude iff SMACT >= 0.65 AND (SMOCC >= 0.35 OR DRAMA >= 0.50).
TEST(PressureFilter, TruthTable) {
  const Engine e = test::engine("aegis");
  for (int bits = 0; bits < 8; ++bits) {
    const bool a = bits & 1, b = bits & 2, c = bits & 4;
    World w = one_shared_gpu();
    w.busy(0, a ? 0.65 : 0.64, b ? 0.35 : 0.34, c ? 0.50 : 0.49);
    const QueuedJob job = test::job(2);
    const auto d = w.tick(e, job);
    const bool excluded = a && (b || c);
    EXPECT_EQ(d.launches.empty(), excluded) << "smact>=a " << a << " smocc>=b " << b << " drama>=c " << c;
    if (excluded) {
      EXPECT_TRUE(d.blocked->by_pressure);
      // Which rule, in the figures it compared (each a risk score of the window).
      EXPECT_NE(d.blocked->reason.find(b ? "gpu0: pressure: busy: SM activity risk 0.65 >= 0.65 and SM occupancy risk "
                                           "0.35 >= 0.35"
                                         : "gpu0: pressure: busy: SM activity risk 0.65 >= 0.65 and DRAM activity "
                                           "risk 0.50 >= 0.50"),
                std::string::npos)
          << d.blocked->reason;
    }
  }
}

TEST(PressureFilter, RiskScoreNotTheLastSample) {
  // 29 quiet samples and one busy one: risk = 0.25 * (mean + median + p95 + EWMA) stays low.
  const Engine e = test::engine("aegis");
  World w = one_shared_gpu();
  w.busy(0, 0.1, 0.1, 0.1);
  w.windows[0].back() = GpuSample{1, 1, 1, 1};
  const QueuedJob job = test::job(2);
  EXPECT_EQ(w.tick(e, job).launches.size(), 1u);
}

TEST(PressureFilter, CoarseFallbackAndMemoryOnly) {
  const Engine e = test::engine("aegis");
  for (double util : {0.69, 0.70}) {
    World w = one_shared_gpu();
    w.gpus[0].level = TelemetryLevel::Coarse;
    w.busy(0, 0, 0, 0, util);
    const QueuedJob job = test::job(2);
    EXPECT_EQ(w.tick(e, job).launches.size(), util < 0.70 ? 1u : 0u) << util;
  }
  World w = one_shared_gpu();
  w.gpus[0].level = TelemetryLevel::MemoryOnly;
  w.busy(0, 1, 1, 1, 1);
  const QueuedJob job = test::job(2);
  EXPECT_EQ(w.tick(e, job).launches.size(), 1u);
}

TEST(PressureFilter, CarmaThresholds) {
  // 0.70/0.40/0.40 is busy for AEGIS (0.65/0.35/0.50) but not for CARMA (0.80/0.45/0.40).
  World w = one_shared_gpu();
  w.busy(0, 0.70, 0.40, 0.40);
  const QueuedJob job = test::job(2);
  EXPECT_TRUE(w.tick(test::engine("aegis"), job).launches.empty());
  EXPECT_EQ(w.tick(test::engine("carma"), job).launches.size(), 1u);
}

TEST(MigSingleGpu, MultiGpuJobsOnlyOnWholeGpus) {
  // GPUs 0-2 are MIG instances, 3 and 4 whole GPUs: a 2-GPU job takes the whole ones,
  // a 1-GPU job may take an instance.
  const Engine e = test::engine("aegis");
  World w(5);
  for (int g = 0; g < 3; ++g) w.gpus[g].mig_instance = true;
  const QueuedJob job = test::job(1, 2);
  auto d = w.tick(e, job);
  ASSERT_EQ(d.launches.size(), 1u);
  EXPECT_EQ(d.launches[0].gpus, (std::vector<int>{3, 4}));
  // With only one whole GPU the 2-GPU job waits, and the reason names the rule.
  World only(3);
  for (int g = 0; g < 2; ++g) only.gpus[g].mig_instance = true;
  const QueuedJob only_one = test::job(1, 2);
  d = only.tick(e, only_one);
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.blocked.has_value());
  EXPECT_NE(d.blocked->reason.find("mig-single-gpu"), std::string::npos) << d.blocked->reason;
  World single(2);
  single.gpus[0].mig_instance = single.gpus[1].mig_instance = true;
  const QueuedJob single_job = test::job(1, 1);
  EXPECT_EQ(single.tick(e, single_job).launches.size(), 1u);
}

}  // namespace
}  // namespace aegis

namespace aegis {
namespace {

// Under MPS a GPU's jobs belong to one user: NVIDIA's control daemon would make another
// user's job wait for the first user's server to go. Off MPS, or declared otherwise, users mix.
TEST(MpsOneUser, AnotherUsersJobWaitsForTheGpu) {
  auto placed = [](void (*tweak)(EngineConfig&), std::int64_t running_owner, std::int64_t new_owner) {
    World w(1);
    auto& r = w.run(1, {0}, 1000);
    r.spec.owner = running_owner;
    QueuedJob j = test::job(2);
    j.spec.owner = new_owner;
    return w.tick(test::engine("aegis", tweak), j).launches.size();
  };
  auto mps = [](EngineConfig& c) { c.mps = true; };
  auto mps_many_users = [](EngineConfig& c) {
    c.mps = true;
    c.mps_one_user_per_gpu = false;
  };
  EXPECT_EQ(placed(mps, 1000, 1001), 0u);
  EXPECT_EQ(placed(mps, 1000, 1000), 1u);
  EXPECT_EQ(placed(nullptr, 1000, 1001), 1u);
  EXPECT_EQ(placed(mps_many_users, 1000, 1001), 1u);
  EXPECT_NE(test::engine("aegis", mps).describe().find("mps-one-user"), std::string::npos);
  EXPECT_EQ(test::engine("aegis").describe().find("mps-one-user"), std::string::npos);
}

}  // namespace
}  // namespace aegis
