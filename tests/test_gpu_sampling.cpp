// What aegisd asks of each GPU sample and when (issue 30, item 4): per-process utilisation
// only on GPUs where a running job awaits its first activity, never the energy counter;
// and a slow sample, taken on the sampling thread, never holds the tick. Counts requests
// and calls, never time.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <poll.h>
#include <sys/stat.h>

#include "runtime/daemon/daemon.h"
#include "runtime/daemon/gpu_sampler.h"
#include "sched/policies.h"
#include "tests/fake_env.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

// The fake environment with a driver whose sample can be held (a slow call) by the test.
class SlowEnv : public test::FakeEnv {
 public:
  std::vector<GpuStatus> sample_gpus(const SampleRequest& what) override {
    std::unique_lock lock(mu_);
    ++entered_;
    changed_.notify_all();
    // Bounded, so that a broken daemon fails the test instead of hanging it.
    changed_.wait_for(lock, std::chrono::seconds(30), [&] { return !hold_; });
    return FakeEnv::sample_gpus(what);
  }
  void hold(bool on) {
    std::lock_guard lock(mu_);
    hold_ = on;
    changed_.notify_all();
  }
  // Waits until `n` samples have begun (false after 30 s).
  bool wait_entered(int n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [&] { return entered_ >= n; });
  }
  int entered() {
    std::lock_guard lock(mu_);
    return entered_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool hold_ = false;
  int entered_ = 0;
};

DaemonConfig config() {
  DaemonConfig cfg;
  cfg.daemon.state_dir = test::temp_path("state");
  mkdir(cfg.daemon.state_dir.c_str(), 0700);
  cfg.daemon.policy = "aegis-auto";
  cfg.daemon.durability = "normal";
  cfg.engine = policy_config("aegis-auto");
  cfg.engine.observation_window_s = 5;
  return cfg;
}

JobId submit(Daemon& d, MiB mem) {
  api::SubmitRequest r;
  r.job.command = {"python3", "train.py"};
  r.job.workdir = "/tmp";
  r.job.name = "train";
  r.job.mem_mib = mem;
  const auto reply = d.respond(r, Caller{1001, 1001, 1}).object;
  EXPECT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  return reply["id"].get<JobId>();
}

// Today every sample read per-process utilisation (1.4-2.6 ms on an H200) and energy
// (2.4-3.2 ms) on every GPU, whether or not a job needed them.
TEST(GpuSampling, PerProcessUtilisationOnlyWhereAJobAwaitsItsAnchorAndNeverEnergy) {
  test::FakeEnv env;
  env.gpus = test::fake_gpus(2, 40960);
  Daemon d(config(), env);
  auto tick = [&] {
    env.clock += 1;
    d.tick(env.clock);
    return env.requests.back();
  };
  SampleRequest r = tick();
  EXPECT_FALSE(r.process_util_everywhere);
  EXPECT_TRUE(r.process_util.empty()) << "no job: no per-process call";
  EXPECT_FALSE(r.energy);

  const JobId a = submit(d, 8000);
  tick();  // launched on GPU 0 after this tick's sample
  ASSERT_TRUE(env.last_launch(a));
  r = tick();
  EXPECT_EQ(r.process_util, std::vector<std::string>{"GPU-fake-0"}) << "a waits for its anchor on GPU 0 alone";
  EXPECT_FALSE(r.energy);

  env.activity(a, 1, 0, 8000, 4242);
  for (int i = 0; i < 3; ++i) tick();  // its activity held anchor_sustained_samples (3) samples: anchored
  EXPECT_EQ(d.respond(api::ShowRequest{a}, Caller{0, 0, 1}).object["job"]["attempt_log"][0]["anchor"], "process-util");
  for (int i = 0; i < 3; ++i) {
    r = tick();
    EXPECT_TRUE(r.process_util.empty()) << "anchored: no per-process call any more";
    EXPECT_FALSE(r.process_util_everywhere);
    EXPECT_FALSE(r.energy);
  }
  for (const auto& q : env.requests) EXPECT_FALSE(q.energy) << "aegisd never reads the energy counter";
}

// Today the tick called the driver itself and waited for it (p99 17 ms per GPU on an H200).
TEST(GpuSampling, TheTickRunsWhileASampleIsSlow) {
  SlowEnv env;
  env.gpus = test::fake_gpus(1, 40960);
  Daemon d(config(), env);
  const int before = env.entered();
  env.hold(true);
  GpuSampler sampler(env);
  ASSERT_TRUE(sampler.request(d.sample_request()));
  ASSERT_TRUE(env.wait_entered(before + 1)) << "the sampling thread never asked the driver";

  // The driver is stuck in that sample; the daemon ticks on and schedules.
  const JobId a = submit(d, 8000);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(sampler.take()) << "nothing completed";
    EXPECT_FALSE(sampler.request(d.sample_request())) << "one sample at a time";
    env.clock += 1;
    d.tick_with(env.clock, nullptr);
  }
  EXPECT_TRUE(env.last_launch(a)) << "launched while the sample was still being taken";
  EXPECT_TRUE(sampler.in_flight());
  EXPECT_EQ(env.entered(), before + 1) << "no tick called the driver";

  env.hold(false);
  pollfd p{sampler.ready_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 30000), 1) << "the held sample never completed";
  const auto done = sampler.take();
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->error.empty());
  ASSERT_EQ(done->gpus.size(), 1u);
  env.clock += 1;
  d.tick_with(env.clock, &*done);
  EXPECT_FALSE(sampler.take()) << "each sample is taken once";
  EXPECT_TRUE(sampler.request(d.sample_request()));
}

}  // namespace
}  // namespace aegis
