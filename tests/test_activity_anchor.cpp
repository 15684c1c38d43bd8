// When a job's observation window starts (lifecycle/activity_anchor.h, Lifecycle::observe):
// a job's CUDA context appears, its model loads, a few warm-up kernels run, then its
// training loop. Each rule must start the window at the training, never at the context
// (the anchor before issue 15) nor at the first small kernel (issue 30).
#include <gtest/gtest.h>

#include "lifecycle/lifecycle.h"

namespace aegis {
namespace {

// Places every job on GPU 0, sharing it.
class GpuZero : public Placer {
 public:
  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    Launch l;
    l.job = job.spec.id;
    l.gpus = {0};
    l.admitted_mib = 1000;
    Placement p;
    p.parts.push_back({0, l, 40960});
    return p;
  }
  void started(const QueuedJob&, const Placement&, Seconds) override {}
  std::optional<std::string> never_runs(const QueuedJob&) const override { return std::nullopt; }
  std::variant<Requeue, Stop> recover(const Failure& f) const override { return Stop{f.job.spec.id, f.detail}; }
};

struct Fixture {
  EngineConfig config;
  Lifecycle life{config, LifecycleOptions{}};
  GpuZero placer;

  explicit Fixture(int jobs) {
    for (JobId id = 1; id <= jobs; ++id) {
      JobSpec s;
      s.id = id;
      life.submitted(s, false, false, 0);
    }
    life.schedule(10, placer);
  }
  // One reading of GPU 0: its activity, and each job's memory and own sample there.
  Effects read(Seconds t, std::optional<double> activity, std::map<JobId, std::pair<MiB, std::optional<double>>> jobs) {
    ActivityReadings r;
    r.gpu_activity[0] = activity;
    for (const auto& [id, seen] : jobs) r.jobs[id].push_back({0, seen.first, seen.second});
    return life.observe(r, t);
  }
  const LifeAttempt& attempt(JobId id) const { return *life.find(id)->current(); }
};

TEST(ActivityAnchor, ProcessSamplesStartTheWindowAtTheJobsFirstKernelNotItsContext) {
  Fixture f(1);
  f.read(11, 0.0, {{1, {300, 0.0}}});   // the CUDA context
  f.read(12, 0.0, {{1, {4000, 0.0}}});  // the model loads
  f.read(14, 0.0, {{1, {8000, 0.0}}});
  EXPECT_FALSE(f.attempt(1).first_activity);
  f.read(15, 0.6, {{1, {9000, 0.5}}});  // its kernels, held for anchor_sustained_samples
  f.read(16, 0.6, {{1, {9000, 0.5}}});
  EXPECT_FALSE(f.attempt(1).first_activity);
  const auto fx = f.read(17, 0.6, {{1, {9000, 0.5}}});
  ASSERT_TRUE(f.attempt(1).first_activity);
  EXPECT_EQ(*f.attempt(1).first_activity, 15);
  EXPECT_EQ(f.attempt(1).anchor, Anchor::ProcessUtil);
  EXPECT_EQ(f.attempt(1).context_at, 11);
  ASSERT_EQ(fx.changes.size(), 1u);
  EXPECT_EQ(fx.changes[0].event, "activity");
  EXPECT_EQ(fx.changes[0].detail, "anchor: process-util");  // aegis show's event line
  EXPECT_EQ(f.life.running_on(0).front().first_activity, 15);  // what the observation gate reads
}

// Issue 30: ResNet-50 on an H200 showed 0.00-0.12 from 8 s to 18 s after launch (cuDNN
// autotuning), 0.86 from 19 s; its anchor came at the first small kernel.
TEST(ActivityAnchor, WarmUpKernelsAreNotTheStartOfTraining) {
  for (const bool own_samples : {true, false}) {
    Fixture f(1);
    const auto sample = [&](double v) { return own_samples ? std::optional<double>(v) : std::nullopt; };
    f.read(11, 0.0, {{1, {300, sample(0.0)}}});
    // Single samples of warm-up kernels, some high, between idle ones.
    const double warm[] = {0.15, 0.0, 0.56, 0.0, 0.22, 0.12, 0.0, 0.3, 0.0};
    Seconds t = 12;
    for (double v : warm) f.read(t++, v, {{1, {static_cast<MiB>(2000 + 500 * t), sample(v)}}});
    EXPECT_FALSE(f.attempt(1).first_activity) << (own_samples ? "own samples" : "GPU activity");
    const Seconds training = t;
    for (int i = 0; i < f.config.anchor_sustained_samples; ++i) f.read(t++, 0.86, {{1, {8000, sample(0.86)}}});
    ASSERT_TRUE(f.attempt(1).first_activity);
    EXPECT_EQ(*f.attempt(1).first_activity, training);  // from the first sample of the held level
    EXPECT_EQ(f.attempt(1).anchor, own_samples ? Anchor::ProcessUtil : Anchor::GpuActivity);
  }
}

TEST(ActivityAnchor, WithSamplesAMemoryPlateauIsNoEvidence) {
  // A job that loaded its model and waits on its data loader has not started.
  Fixture f(1);
  for (Seconds t = 11; t < 60; t += 1) f.read(t, 0.0, {{1, {t < 13 ? 300 : 8000, 0.0}}});
  EXPECT_FALSE(f.attempt(1).first_activity);
}

TEST(ActivityAnchor, WithoutSamplesTheGpusRiseCountsWhileTheJobIsTheOnlyNewOne) {
  Fixture f(1);
  f.read(11, 0.30, {{1, {300, std::nullopt}}});  // another, older job keeps the GPU at 30 %
  f.read(12, 0.33, {{1, {4000, std::nullopt}}});  // noise below the rise
  EXPECT_FALSE(f.attempt(1).first_activity);
  for (Seconds t = 13; t <= 15; t += 1) f.read(t, 0.70, {{1, {9000, std::nullopt}}});
  ASSERT_TRUE(f.attempt(1).first_activity);
  EXPECT_EQ(*f.attempt(1).first_activity, 13);
  EXPECT_EQ(f.attempt(1).anchor, Anchor::GpuActivity);
}

TEST(ActivityAnchor, TwoNewJobsOnOneGpuCannotTellWhoseRiseItIs) {
  Fixture f(2);
  f.read(11, 0.0, {{1, {300, std::nullopt}}, {2, {300, std::nullopt}}});
  f.read(12, 0.8, {{1, {9000, std::nullopt}}, {2, {300, std::nullopt}}});
  EXPECT_FALSE(f.attempt(1).first_activity);
  EXPECT_FALSE(f.attempt(2).first_activity);
  // The plateau rule still answers for the one whose memory grew and settled.
  const Seconds plateau = f.config.anchor_plateau_s;
  for (Seconds t = 13; t <= 12 + plateau; t += 1) f.read(t, 0.8, {{1, {9000, std::nullopt}}, {2, {300, std::nullopt}}});
  ASSERT_TRUE(f.attempt(1).first_activity);
  EXPECT_EQ(f.attempt(1).anchor, Anchor::MemoryPlateau);
  EXPECT_EQ(*f.attempt(1).first_activity, 12);  // where its memory settled
  EXPECT_FALSE(f.attempt(2).first_activity);     // a context alone is no plateau
  // Job 2 is now the only new job there, but the GPU's 80 % is job 1's: no rise of its own.
  f.read(14 + plateau, 0.8, {{2, {300, std::nullopt}}});
  EXPECT_FALSE(f.attempt(2).first_activity);
  for (Seconds t = 15 + plateau; t <= 17 + plateau; t += 1) f.read(t, 0.95, {{2, {4000, std::nullopt}}});  // its own kernels
  ASSERT_TRUE(f.attempt(2).first_activity);
  EXPECT_EQ(f.attempt(2).anchor, Anchor::GpuActivity);
  EXPECT_EQ(*f.attempt(2).first_activity, 15 + plateau);
}

TEST(ActivityAnchor, WithoutAnyActivityMetricTheMemoryPlateauStartsWhereTheMemorySettled) {
  Fixture f(1);
  const Seconds plateau = f.config.anchor_plateau_s;
  f.read(11, std::nullopt, {{1, {300, std::nullopt}}});
  // Loading: a step a second, each larger than the tolerance.
  for (Seconds t = 12; t <= 15; t += 1) f.read(t, std::nullopt, {{1, {static_cast<MiB>(300 + 2000 * (t - 11)), std::nullopt}}});
  // Training: steady, with allocator jitter inside the tolerance.
  for (Seconds t = 16; t < 15 + plateau; t += 1) f.read(t, std::nullopt, {{1, {8300 + static_cast<MiB>(t) % 3 * 10, std::nullopt}}});
  EXPECT_FALSE(f.attempt(1).first_activity);  // not steady for plateau_s yet
  f.read(15 + plateau, std::nullopt, {{1, {8300, std::nullopt}}});
  ASSERT_TRUE(f.attempt(1).first_activity);
  EXPECT_EQ(*f.attempt(1).first_activity, 15);
  EXPECT_EQ(f.attempt(1).anchor, Anchor::MemoryPlateau);
  EXPECT_EQ(f.attempt(1).context_at, 11);
}

TEST(ActivityAnchor, ReadingsOfJobsNotHoldingGpusAndOfOtherGpusAreIgnored) {
  Fixture f(1);
  ActivityReadings r;
  r.gpu_activity[3] = 0.0;
  r.jobs[1].push_back({3, 9000, 1.0});  // GPU 3 is not the job's
  r.jobs[7].push_back({0, 9000, 1.0});  // no such job
  EXPECT_TRUE(f.life.observe(r, 11).changes.empty());
  EXPECT_FALSE(f.attempt(1).first_activity);
}

TEST(ActivityAnchor, NamesRoundTrip) {
  for (Anchor a : {Anchor::None, Anchor::Reported, Anchor::ProcessUtil, Anchor::GpuActivity, Anchor::MemoryPlateau})
    EXPECT_EQ(parse_anchor(to_string(a)), a);
  EXPECT_FALSE(parse_anchor("context"));
}

}  // namespace
}  // namespace aegis
