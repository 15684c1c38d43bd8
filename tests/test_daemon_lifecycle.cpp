// aegisd's logic on a fake environment (tests/fake_env.h): launches, first activity, OOM
// and the recovery ladder, cancels, a restart that re-adopts running jobs, MPS limits and
// a full disk at launch, with a real store and no process at all.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "runtime/daemon/daemon.h"
#include "sched/policies.h"
#include "tests/fake_env.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

constexpr int kExit1 = 1 << 8;  // a wait status: exit(1)

struct Rig {
  test::FakeEnv env;
  DaemonConfig cfg;
  std::unique_ptr<Daemon> d;

  explicit Rig(int gpus = 2, const std::string& policy = "aegis-auto", const std::string& sharing = "process") {
    cfg.daemon.state_dir = test::temp_path("state");
    mkdir(cfg.daemon.state_dir.c_str(), 0700);
    cfg.daemon.policy = policy;
    cfg.daemon.sharing = sharing;
    cfg.daemon.mps_pipe_dir = "/tmp/fake-mps-pipe";
    cfg.daemon.durability = "normal";
    cfg.engine = policy_config(policy);
    cfg.engine.observation_window_s = 5;
    env.gpus = test::fake_gpus(gpus, 40960);
    restart();
  }
  void restart() {
    d.reset();
    d = std::make_unique<Daemon>(cfg, env);
  }
  // Submits as `uid` and returns the reply.
  nlohmann::json submit(uid_t uid, std::optional<MiB> mem, bool exclusive = false) {
    api::SubmitRequest r;
    r.job.command = {"python3", "train.py"};
    r.job.workdir = "/tmp";
    r.job.name = "train";
    r.job.mem_mib = mem;
    r.job.exclusive = exclusive;
    return d->respond(r, Caller{uid, uid, 1}).object;
  }
  JobId submit_ok(uid_t uid, std::optional<MiB> mem, bool exclusive = false) {
    auto r = submit(uid, mem, exclusive);
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
    return r["id"].get<JobId>();
  }
  nlohmann::json show(JobId id) { return d->respond(api::ShowRequest{id}, Caller{0, 0, 1}).object["job"]; }
  void tick(Seconds dt = 1) {
    env.clock += dt;
    d->tick(env.clock);
  }
};

TEST(DaemonLifecycle, LaunchesWithItsGpusAndStartsTheWindowAtFirstActivity) {
  Rig rig;
  const JobId a = rig.submit_ok(1001, 8000);
  rig.tick();
  const auto* l = rig.env.last_launch(a);
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->started);
  EXPECT_EQ(l->launch.uid, 1001u);
  EXPECT_EQ(l->launch.user, "ann");
  EXPECT_EQ(rig.env.env_of(a, "CUDA_VISIBLE_DEVICES"), "GPU-fake-0");
  EXPECT_EQ(rig.env.env_of(a, "AEGIS_JOB_ID"), std::to_string(a));
  EXPECT_EQ(rig.show(a)["state"], "running");
  // Exclusive-first: the idle GPU 1 goes to the next job, alone.
  const JobId b = rig.submit_ok(1002, 8000);
  rig.tick();
  EXPECT_EQ(rig.show(b)["state"], "running");
  EXPECT_EQ(rig.env.env_of(b, "CUDA_VISIBLE_DEVICES"), "GPU-fake-1");
}

TEST(DaemonLifecycle, ObservationWindowRunsFromFirstActivity) {
  Rig rig(1);
  const JobId a = rig.submit_ok(1001, 8000);
  rig.tick();
  const JobId b = rig.submit_ok(1002, 8000);
  for (int i = 0; i < 10; ++i) rig.tick();
  EXPECT_EQ(rig.show(b)["state"], "queued") << "no activity yet: the GPU stays closed";
  rig.env.activity(a, 1, 0, 8000, 4242);
  rig.tick();
  const Seconds training = rig.env.clock;
  for (int i = 1; i < rig.cfg.engine.anchor_sustained_samples; ++i) rig.tick();  // held: training, not warm-up
  const double first = rig.show(a)["attempt_log"][0]["first_activity"].get<double>();
  EXPECT_EQ(first, training);
  while (rig.env.clock < training + 4) rig.tick();
  EXPECT_EQ(rig.show(b)["state"], "queued") << "inside the 5 s window";
  rig.tick(2);
  EXPECT_EQ(rig.show(b)["state"], "running") << "after it";
  EXPECT_EQ(rig.show(a)["attempt_log"][0]["peak_mib"], 8000);
}

// Issue 15: NVML lists a job at CUDA context creation; the window starts at its kernels.
TEST(DaemonLifecycle, TheContextAloneDoesNotStartTheWindowItsFirstKernelDoes) {
  Rig rig(1);
  const JobId a = rig.submit_ok(1001, 8000);
  rig.tick();
  rig.env.process(a, 1, 0, 300, 4242, 0.0);  // the context; its sample says no kernel ran
  rig.tick();
  const Seconds context = rig.env.clock;
  rig.env.gpus[0].processes.clear();
  rig.env.process(a, 1, 0, 6000, 4242, 0.0);  // the model loads
  for (int i = 0; i < 3; ++i) rig.tick();
  auto att = rig.show(a)["attempt_log"][0];
  EXPECT_TRUE(att["first_activity"].is_null());
  EXPECT_EQ(att["context_at"].get<double>(), context);
  rig.env.gpus[0].processes.clear();
  rig.env.process(a, 1, 0, 8000, 4242, 0.7);  // training
  rig.tick();
  const Seconds training = rig.env.clock;
  for (int i = 1; i < rig.cfg.engine.anchor_sustained_samples; ++i) rig.tick();
  att = rig.show(a)["attempt_log"][0];
  EXPECT_EQ(att["first_activity"].get<double>(), training);
  EXPECT_EQ(att["anchor"], "process-util");
  rig.restart();  // kept in the store
  att = rig.show(a)["attempt_log"][0];
  EXPECT_EQ(att["anchor"], "process-util");
  EXPECT_EQ(att["context_at"].get<double>(), context);
}

// A GPU process of no job is shown as foreign, and even booked accounting (capacity minus
// admitted estimates) does not hand its memory out.
TEST(DaemonLifecycle, AForeignProcessIsShownAndItsMemoryNeverHandedOut) {
  Rig rig(1);
  rig.cfg.engine.memory_accounting = "booked";
  rig.restart();
  rig.env.gpus[0].processes.push_back({777, MiB{30000}, std::nullopt});  // not ours: no owner
  rig.env.gpus[0].free_mib = 40960 - 30000;
  rig.tick();
  const auto gpus = rig.d->respond(api::GpusRequest{}, Caller{0, 0, 1}).object["gpus"];
  ASSERT_EQ(gpus[0]["foreign"].size(), 1u);
  EXPECT_EQ(gpus[0]["foreign"][0]["pid"], 777);
  EXPECT_EQ(gpus[0]["foreign"][0]["used_mib"], 30000);
  // 40960 - 512 (guard) - 30000 leaves 10448: not enough for 9000 + 2048 (margin).
  const JobId a = rig.submit_ok(1001, 9000);
  for (int i = 0; i < 3; ++i) rig.tick();
  EXPECT_EQ(rig.show(a)["state"], "queued");
  rig.env.gpus[0].processes.clear();  // it ended
  rig.env.gpus[0].free_mib = 40960;
  rig.tick();
  rig.tick();
  EXPECT_EQ(rig.show(a)["state"], "running");
}

TEST(DaemonLifecycle, OomClimbsTheLadderAndSucceeds) {
  Rig rig(1);
  const JobId a = rig.submit_ok(1001, std::nullopt);
  rig.tick();
  rig.env.end(a, 1, kExit1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  rig.tick();
  auto j = rig.show(a);
  EXPECT_EQ(j["attempt_log"][0]["outcome"], "oom");
  EXPECT_EQ(j["attempt_log"][0]["exit_code"], 1);
  ASSERT_EQ(j["attempt_log"].size(), 2u) << "requeued and relaunched at once on the idle GPU";
  // It had the whole GPU: above the ladder's top rung, it retries alone (the ladder's own
  // rungs are unit-tested with the engine).
  EXPECT_TRUE(j["recovery"]["exclusive_only"].get<bool>());
  EXPECT_EQ(j["recovery"]["oom_count"], 1);
  bool requeued = false;
  for (const auto& e : j["events"]) requeued |= e["kind"] == "requeue";
  EXPECT_TRUE(requeued);
  rig.env.end(a, 2, 0);
  rig.tick();
  j = rig.show(a);
  EXPECT_EQ(j["state"], "completed");
  EXPECT_EQ(j["exit_code"], 0);
}

TEST(DaemonLifecycle, CancelIsRecordedThenSignalledAndOnlyCountsIfItArrived) {
  Rig rig(1);
  const JobId a = rig.submit_ok(1001, 8000);
  rig.tick();
  api::CancelRequest c;
  c.ids = {a};
  EXPECT_FALSE(rig.d->respond(c, Caller{1002, 1002, 1}).object["ok"].get<bool>()) << "not bob's";
  rig.env.stop_refused.insert({a, 1});  // its shim is still starting: asked again later
  EXPECT_TRUE(rig.d->respond(c, Caller{1001, 1001, 1}).object["ok"].get<bool>());
  EXPECT_TRUE(rig.env.stops.empty());
  rig.env.stop_refused.clear();
  rig.tick();
  ASSERT_EQ(rig.env.stops.size(), 1u);
  // It ended on its own before the cancel reached it: it completed.
  rig.env.end(a, 1, 0);
  rig.tick();
  EXPECT_EQ(rig.show(a)["state"], "completed");
  // A queued job is cancelled at once, with no signal.
  const JobId b = rig.submit_ok(1001, 8000, true);
  const JobId q = rig.submit_ok(1001, 8000, true);
  rig.tick();
  c.ids = {q};
  rig.d->respond(c, Caller{1001, 1001, 1});
  EXPECT_EQ(rig.show(q)["state"], "cancelled");
  EXPECT_EQ(rig.env.stops.size(), 1u);
  (void)b;
}

TEST(DaemonLifecycle, ARestartReadoptsRunningJobsAndClassifiesThoseThatEnded) {
  Rig rig(2);
  const JobId a = rig.submit_ok(1001, 8000);
  const JobId b = rig.submit_ok(1002, 8000);
  rig.tick();
  ASSERT_EQ(rig.show(b)["state"], "running");
  const JobId q = rig.submit_ok(1001, 30000, true);  // waits: both GPUs hold a job
  rig.tick();
  // The daemon dies; meanwhile a ends, b runs on.
  rig.d.reset();
  rig.env.end(a, 1, 0);
  rig.restart();
  EXPECT_EQ(rig.show(q)["state"], "queued");
  rig.tick();
  EXPECT_EQ(rig.show(a)["state"], "completed");
  EXPECT_EQ(rig.show(b)["state"], "running");
  EXPECT_EQ(rig.env.launched.count({b, 2}), 0u) << "b was never started twice";
  // An attempt that vanished after starting: unknown, not run again.
  rig.env.status.erase({b, 1});
  rig.env.status[{b, 1}] = [] {
    AttemptStatus s;
    s.state = AttemptStatus::State::Gone;
    s.started = true;
    return s;
  }();
  rig.tick();
  EXPECT_EQ(rig.show(b)["state"], "failed");
  EXPECT_EQ(rig.show(b)["attempt_log"][0]["outcome"], "unknown");
}

// Under MPS every job gets its limit, also the first one on an idle GPU (a later neighbour
// must not be pushed out by its growth); and a GPU holds one user's jobs only.
TEST(DaemonLifecycle, MpsLimitsForEveryJobAndOneUserPerGpu) {
  Rig rig(1, "aegis-auto", "mps");
  const JobId a = rig.submit_ok(1001, 6000);
  rig.tick();
  EXPECT_EQ(rig.env.env_of(a, "CUDA_MPS_PIPE_DIRECTORY"), "/tmp/fake-mps-pipe/GPU-fake-0");  // its GPU's daemon
  EXPECT_EQ(rig.env.env_of(a, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
            "0=" + std::to_string(6000 + rig.cfg.engine.memory_margin_mib) + "M")
      << "alone for now, but others may join";
  rig.env.activity(a, 1, 0, 6000, 4242);
  rig.env.gpus[0].used_mib = 6000;
  rig.env.gpus[0].free_mib = 40960 - 6000;
  const JobId b = rig.submit_ok(1001, 7000);      // the same user: joins
  const JobId other = rig.submit_ok(1002, 7000);  // another user: NVIDIA's MPS would queue it
  for (int i = 0; i < 8; ++i) rig.tick();
  ASSERT_EQ(rig.show(b)["state"], "running");
  EXPECT_EQ(rig.env.env_of(b, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
            "0=" + std::to_string(7000 + rig.cfg.engine.memory_margin_mib) + "M");
  EXPECT_EQ(rig.show(other)["state"], "queued");
}

// One MPS control daemon per GPU (issue 30: one for all GPUs made a second user's job on
// another GPU wait for the first user's server): each job is the client of its own GPU's
// daemon, so two users' jobs on two GPUs run side by side; a job on both GPUs runs alone
// and without MPS (a client reaches one daemon, which sees one GPU).
TEST(DaemonLifecycle, MpsJobsUseTheirGpusControlDaemonAndMultiGpuJobsRunAlone) {
  Rig rig(2, "aegis-auto", "mps");
  const JobId a = rig.submit_ok(1001, 6000);
  rig.tick();
  const JobId b = rig.submit_ok(1002, 6000);  // another user, on the other GPU
  rig.tick();
  ASSERT_EQ(rig.show(b)["state"], "running");
  EXPECT_EQ(rig.env.env_of(a, "CUDA_VISIBLE_DEVICES"), "GPU-fake-0");
  EXPECT_EQ(rig.env.env_of(a, "CUDA_MPS_PIPE_DIRECTORY"), "/tmp/fake-mps-pipe/GPU-fake-0");
  EXPECT_EQ(rig.env.env_of(b, "CUDA_VISIBLE_DEVICES"), "GPU-fake-1");
  EXPECT_EQ(rig.env.env_of(b, "CUDA_MPS_PIPE_DIRECTORY"), "/tmp/fake-mps-pipe/GPU-fake-1");
  rig.env.end(a, 1, 0);
  rig.env.end(b, 1, 0);
  rig.tick();
  api::SubmitRequest r;
  r.job.command = {"torchrun", "train.py"};
  r.job.workdir = "/tmp";
  r.job.gpus = 2;
  r.job.mem_mib = 6000;
  const auto reply = rig.d->respond(r, Caller{1001, 1001, 1}).object;
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  const JobId two = reply["id"].get<JobId>();
  rig.tick();
  ASSERT_EQ(rig.show(two)["state"], "running");
  EXPECT_EQ(rig.env.env_of(two, "CUDA_VISIBLE_DEVICES"), "GPU-fake-0,GPU-fake-1");
  EXPECT_EQ(rig.env.env_of(two, "CUDA_MPS_PIPE_DIRECTORY"), "");
  EXPECT_EQ(rig.env.env_of(two, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "");
  rig.env.activity(two, 1, 0, 6000, 4243);
  const JobId c = rig.submit_ok(1001, 1000);  // the same user, small: would join it, but nobody may
  for (int i = 0; i < 8; ++i) rig.tick();
  EXPECT_EQ(rig.show(c)["state"], "queued");
}

// Estimator-free (policy aegis, no declared memory) under MPS, a job's limit is its GPU's
// free memory at placement, not the floor plus the margin (7,168 MiB), which killed every
// larger job first (issue 30).
TEST(DaemonLifecycle, MpsLimitWithoutEstimateIsTheFreeMemoryAtPlacement) {
  Rig rig(1, "aegis", "mps");
  const JobId a = rig.submit_ok(1001, std::nullopt);
  rig.tick();
  const MiB free = 40960 - rig.cfg.engine.memory_guard(40960);  // an idle GPU, less the guard
  EXPECT_EQ(rig.env.env_of(a, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=" + std::to_string(free) + "M");
}

TEST(DaemonLifecycle, AFullDiskAtLaunchLeavesTheJobQueuedWithoutAnAttempt) {
  Rig rig(1);
  rig.env.prepare_failures = 1;
  const JobId a = rig.submit_ok(1001, 8000);
  rig.tick();
  auto j = rig.show(a);
  EXPECT_EQ(j["state"], "queued");
  EXPECT_EQ(j["attempts"], 0);
  rig.tick(1);
  EXPECT_EQ(rig.show(a)["state"], "queued") << "launches wait after a full disk";
  rig.tick(10);
  EXPECT_EQ(rig.show(a)["state"], "running");
  EXPECT_EQ(rig.show(a)["attempts"], 1);
}

TEST(DaemonLifecycle, APolicyNeedingWhatTheServerCannotGiveIsRefused) {
  test::FakeEnv env;
  env.gpus = test::fake_gpus(1, 40960);
  DaemonConfig cfg;
  cfg.daemon.state_dir = test::temp_path("state");
  mkdir(cfg.daemon.state_dir.c_str(), 0700);
  cfg.daemon.policy = "aegis-learned";
  cfg.engine = policy_config("aegis-learned");
  try {
    Daemon d(cfg, env);
    FAIL() << "aegis-learned without learned_model was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("policy aegis-learned needs the learned memory estimate"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("set learned_model"), std::string::npos);
  }
  // A job lacking what the policy admits by is refused at submit, naming the flag.
  Rig rig(1, "aegis-peak");
  auto r = rig.submit(1001, 8000);
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_NE(r["error"].get<std::string>().find("--profiled-mem"), std::string::npos) << r.dump();
}

}  // namespace
}  // namespace aegis
