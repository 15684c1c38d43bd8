// The queues with the real engine behind a one-server placer: their order (recovery
// first), strict head-of-line and its relaxation, several jobs started in one pass, failures
// through the recovery rule and placed in the same pass, a job no GPU can hold leaving the
// queue. The lifecycle owns these rules; the engine is asked about one job at a time.
#include <gtest/gtest.h>

#include "lifecycle/lifecycle.h"
#include "tests/engine_fixture.h"

namespace aegis {
namespace {

using test::World;

// A lifecycle and a placer over a World's GPUs, as aegisd wires them (its running jobs
// are the World's, which no lifecycle knows, and the lifecycle's own).
struct Rig {
  World& world;
  Engine engine;
  Lifecycle life;
  OneServerPlacer placer;

  Rig(World& w, const std::string& policy, void (*tweak)(EngineConfig&) = nullptr)
      : world(w), engine(test::engine(policy, tweak)), life(engine.config(), LifecycleOptions{}), placer(engine) {
    std::vector<DeviceInfo> devices;
    for (const auto& g : w.gpus) devices.push_back({g.total_mib, g.mig_instance});
    placer.feasibility.emplace(engine, devices);
    placer.server.state = w.state;
  }

  void submit(const QueuedJob& j) { life.submitted(j.spec, false, false, world.now); }
  // A job waiting in the recovery queue (as restored after a restart).
  void waiting_to_recover(const QueuedJob& j, std::int64_t seq) {
    LifeJob l;
    l.queued = j;
    l.queue = QueueName::Recovery;
    l.queue_seq = seq;
    life.restore(std::move(l));
  }
  Effects pass() {
    placer.server.views = world.views();
    placer.server.running = world.running;
    for (auto& r : life.running_on(0)) placer.server.running.push_back(std::move(r));
    return life.schedule(world.now, placer);
  }
};

std::vector<JobId> started(const Effects& fx) {
  std::vector<JobId> ids;
  for (const auto& s : fx.starts) ids.push_back(s.job);
  return ids;
}

GpuIndices gpus_of(const Effects::Start& s) { return s.placement.parts.at(0).launch.gpus; }

TEST(LifecycleQueue, StrictHeadOfLineBlocksLaterJobs) {
  // The head needs 2 GPUs, only GPU 1 can take work; a 1-GPU job behind it would fit.
  World w(2);
  w.run(1, {0}, 39000);
  Rig strict(w, "aegis");
  strict.submit(test::job(2, 2));
  strict.submit(test::job(3, 1));
  auto fx = strict.pass();
  EXPECT_TRUE(fx.starts.empty());
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 2);

  // Relaxed, the job behind starts, and the head is still the one said to wait, in the
  // stages' words (the end of the pass used to drop it: issue 32).
  Rig relaxed(w, "aegis", [](EngineConfig& c) { c.strict_head_of_line = false; });
  relaxed.submit(test::job(2, 2));
  relaxed.submit(test::job(3, 1));
  fx = relaxed.pass();
  EXPECT_EQ(started(fx), std::vector<JobId>{3});
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 2);
  EXPECT_NE(fx.blocked->reason.find("needs 2 GPUs with 5120 MiB free; gpu0: memory: needs 5120 MiB, 1448 free"),
            std::string::npos)
      << fx.blocked->reason;
}

TEST(LifecycleQueue, PlacesSeveralJobsPerPassClosingEachGpu) {
  World w(3);
  Rig rig(w, "aegis");
  for (JobId i = 10; i < 15; ++i) rig.submit(test::job(i));
  const auto fx = rig.pass();
  // Three idle GPUs, one job each; the fourth job finds every GPU observing.
  EXPECT_EQ(started(fx), (std::vector<JobId>{10, 11, 12}));
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 13);
  EXPECT_NE(fx.blocked->reason.find("gpu2: observing: a new job is observed"), std::string::npos) << fx.blocked->reason;
  EXPECT_EQ(rig.life.queue_order(), (std::vector<JobId>{13, 14}));
}

TEST(LifecycleQueue, NaivePacksFirstFitWithoutObservation) {
  World w(2);
  w.run(1, {0}, 1000);
  w.run(2, {1}, 1000);
  Rig rig(w, "naive");
  for (JobId i = 10; i < 13; ++i) rig.submit(test::job(i));
  const auto fx = rig.pass();
  ASSERT_EQ(started(fx), (std::vector<JobId>{10, 11, 12}));
  for (const auto& s : fx.starts) EXPECT_EQ(gpus_of(s), GpuIndices{0});
}

TEST(LifecycleQueue, RecoveryQueueGoesFirst) {
  // One idle GPU: the job retrying after an OOM gets it, though the other came first.
  World w(1);
  Rig rig(w, "aegis");
  rig.submit(test::job(1));
  QueuedJob r = test::job(2);
  r.recovery.floor_mib = 10240;
  rig.waiting_to_recover(r, 100);
  EXPECT_EQ(rig.life.queue_order(), (std::vector<JobId>{2, 1}));
  const auto fx = rig.pass();
  EXPECT_EQ(started(fx), std::vector<JobId>{2});
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 1);
}

TEST(LifecycleQueue, ExclusivePolicyNeverShares) {
  World w(2);
  w.run(1, {0}, 1000);
  Rig rig(w, "exclusive");
  rig.submit(test::job(2));
  rig.submit(test::job(3));
  const auto fx = rig.pass();
  ASSERT_EQ(started(fx), std::vector<JobId>{2});
  EXPECT_EQ(gpus_of(fx.starts[0]), GpuIndices{1});
  ASSERT_TRUE(fx.blocked);
  EXPECT_EQ(fx.blocked->job, 3);
  EXPECT_NE(fx.blocked->reason.find("waiting for 1 idle GPU"), std::string::npos) << fx.blocked->reason;
}

TEST(LifecycleQueue, FailuresGoThroughTheRecoveryRuleAndARequeuedJobIsPlacedInTheSamePass) {
  // Two GPUs with 12000 MiB left after the guard each: jobs 5 and 6 share them.
  World w(2);
  w.run(1, {0}, 28448);
  w.run(2, {1}, 28448);
  Rig rig(w, "aegis");
  rig.submit(test::job(5));
  rig.submit(test::job(6));
  auto fx = rig.pass();
  ASSERT_EQ(started(fx), (std::vector<JobId>{5, 6}));
  EXPECT_EQ(fx.starts[0].placement.parts.at(0).launch.free_at_placement, 12000);
  // 5 runs out of memory, 6 fails otherwise; the others end, the GPUs are free again.
  w.now += 1000;
  rig.life.ended(5, {AttemptOutcome::Oom, "CUDA out of memory"}, w.now);
  rig.life.ended(6, {AttemptOutcome::Failed, "exit status 2"}, w.now);
  w.running.clear();
  for (auto& g : w.gpus) g.free_mib = g.total_mib;
  fx = rig.pass();
  EXPECT_EQ(rig.life.find(6)->state, JobState::Failed);
  EXPECT_EQ(rig.life.find(6)->reason, "exit status 2");
  // The ladder's floor from what it had (12000 MiB free): 18432 MiB; and it starts at once.
  EXPECT_EQ(rig.life.find(5)->queued.recovery.floor_mib, 18432);
  EXPECT_EQ(started(fx), std::vector<JobId>{5});
  EXPECT_EQ(rig.life.find(5)->state, JobState::Running);
}

TEST(LifecycleQueue, AJobNoGpuCanHoldLeavesAndTheQueueMovesOn) {
  // After an OOM alone on a 40 GiB GPU the job may only go to a larger GPU; there is none.
  World w(2);
  Rig rig(w, "aegis");
  QueuedJob j = test::job(1);
  j.recovery.exclusive_only = true;
  j.recovery.oom_count = 1;
  j.recovery.floor_mib = 40449;
  rig.waiting_to_recover(j, 1);
  rig.submit(test::job(2));
  const auto fx = rig.pass();
  EXPECT_EQ(rig.life.find(1)->state, JobState::Failed);
  EXPECT_NE(rig.life.find(1)->reason.find("it needs 40449 MiB per GPU"), std::string::npos) << rig.life.find(1)->reason;
  EXPECT_EQ(started(fx), std::vector<JobId>{2});
}

}  // namespace
}  // namespace aegis
