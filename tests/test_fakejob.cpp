// aegis-fakejob as the daemon runs it: memory that shows while it runs, the PyTorch OOM
// message and status, slowdown next to a co-runner by the emulated GPU's contention model,
// release on SIGTERM; on MIG instances; as an MPS client (memory limits, thread percentage,
// the control daemon). The contention model itself and its calibration on Gavel's pairs.
// Nothing here races the clock: the tests wait on what the job shows in the shared state
// (memory, activity, the speed it reports) with generous timeouts, and check wall times
// from below only (a loaded machine makes a job late, never early).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "runtime/gpu/emulated/contention.h"
#include "runtime/gpu/emulated/contention_fit.h"
#include "runtime/gpu/emulated/device_ids.h"
#include "runtime/gpu/emulated/state.h"
#include "tests/test_util.h"

extern char** environ;

namespace {

using namespace aegis;
using Clock = std::chrono::steady_clock;

struct Job {
  pid_t pid = -1;
  std::string out, err;  // paths of its stdout and stderr
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Wall seconds from the job's "done: <wall> s wall, <solo> s solo" line, or -1.
double wall_of(const std::string& out) {
  const auto at = out.find("done: ");
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + 6);
}

// The done line prints wall time to 0.01 s: a job that ran at speed s for `solo` seconds of
// work shows at least solo / s less this.
constexpr double kPrinted = 0.005 + 1e-9;

// Generous: reached only when the behaviour is wrong, never by a slow machine.
constexpr double kTimeoutS = 60;

// Polls `done` every few milliseconds; false after `timeout_s`.
bool eventually(const std::function<bool()>& done, double timeout_s = kTimeoutS) {
  const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

class FakeJob : public ::testing::Test {
 protected:
  void SetUp() override {
    state_path_ = test::temp_path("gpus.state");
    std::remove(state_path_.c_str());
    setenv("AEGIS_EMULATED_STATE", state_path_.c_str(), 1);
    unsetenv("AEGIS_EMULATED_GPUS");
    unsetenv("CUDA_VISIBLE_DEVICES");
    std::string error;
    const std::vector<emu::GpuSpec> gpus(2, emu::GpuSpec{gpu_mib()});
    state_ = emu::State::open(state_path_, gpus, &error);
    ASSERT_TRUE(state_) << error;
  }
  virtual MiB gpu_mib() const { return 10000; }
  void TearDown() override {
    for (const auto& j : jobs_) {
      if (j.pid > 0 && kill(j.pid, SIGKILL) == 0) waitpid(j.pid, nullptr, 0);
      std::remove(j.out.c_str());
      std::remove(j.err.c_str());
    }
    unsetenv("AEGIS_EMULATED_STATE");
    unsetenv("CUDA_VISIBLE_DEVICES");
    state_.reset();
    std::remove(state_path_.c_str());
  }

  // Starts aegis-fakejob with `args`, CUDA_VISIBLE_DEVICES set to `visible` unless null,
  // and the variables `env` ("NAME=value") added to its environment.
  Job start(const std::vector<std::string>& args, const char* visible = nullptr, std::vector<std::string> env = {}) {
    Job j;
    j.out = test::temp_path("job" + std::to_string(jobs_.size()) + ".out");
    j.err = test::temp_path("job" + std::to_string(jobs_.size()) + ".err");
    if (visible) setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
    std::vector<std::string> all{AEGIS_FAKEJOB};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, j.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, j.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (char** e = environ; *e; ++e) env.push_back(*e);  // after `env`: the first of a name wins
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&j.pid, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) j.pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    jobs_.push_back(j);
    return j;
  }

  // Its exit status (128 + signal if killed), or -1 after `timeout_s`.
  int wait(Job& j, double timeout_s = kTimeoutS) {
    const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < end) {
      int status = 0;
      if (waitpid(j.pid, &status, WNOHANG) == j.pid) {
        j.pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  // What `pid` holds on `gpu` now (0 when nothing).
  MiB held(int gpu, pid_t pid) {
    emu::ProcessEntry entries[64];
    const auto n = state_->processes(gpu, entries);
    for (std::size_t i = 0; i < n && i < 64; ++i)
      if (entries[i].pid == static_cast<std::uint32_t>(pid)) return entries[i].used_mib;
    return 0;
  }

  // Polls until `pid` holds `mib` on `gpu`; false after `timeout_s`.
  bool wait_held(int gpu, pid_t pid, MiB mib, double timeout_s = kTimeoutS) {
    return eventually([&] { return held(gpu, pid) == mib; }, timeout_s);
  }

  // Polls until `device` shows this DRAM activity (the speed-weighted sum of its processes'
  // solo values: how the test sees the speeds the jobs report); false after the timeout.
  bool wait_drama(int device, double want) {
    return eventually([&] { return std::abs(state_->read(device).activity.drama - want) < 1e-9; });
  }
  bool wait_smact(int device, double want) {
    return eventually([&] { return std::abs(state_->read(device).activity.smact - want) < 1e-9; });
  }

  std::string state_path_;
  std::unique_ptr<emu::State> state_;
  std::vector<Job> jobs_;
};

TEST_F(FakeJob, JobThatFitsRunsAndShowsItsMemory) {
  auto j = start({"--mem", "2000", "--smact", "0.5", "--seconds", "0.6", "--startup", "0.1"},
                 "GPU-aeg15000-0000-0000-0000-000000000001");
  ASSERT_GT(j.pid, 0);
  EXPECT_TRUE(wait_held(1, j.pid, 2000));
  EXPECT_EQ(held(0, j.pid), 0);
  EXPECT_TRUE(wait_smact(1, 0.5)) << state_->read(1).activity.smact;  // alone: its solo activity, speed 1
  EXPECT_EQ(wait(j), 0) << slurp(j.err);
  const auto out = slurp(j.out);
  EXPECT_NE(out.find("done: "), std::string::npos) << out;
  EXPECT_NE(out.find(" s wall, 0.60 s solo\n"), std::string::npos) << out;
  EXPECT_GE(wall_of(out), 0.6 - kPrinted) << out;
  EXPECT_EQ(state_->read(1).used_mib, 0);
  EXPECT_EQ(state_->read(1).process_count, 0);
}

// Five equal steps, 0.5 s apart: the test sees a step below the whole (each lasts long
// enough for a poll every 2 ms, even on a loaded machine), then the whole.
TEST_F(FakeJob, MemoryRampsUp) {
  auto j = start({"--mem", "1000", "--smact", "0.2", "--seconds", "2.5", "--ramp", "2", "--startup", "0"});
  ASSERT_GT(j.pid, 0);
  MiB least = 1000, most = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(kTimeoutS);
  while (most < 1000 && Clock::now() < end) {
    if (const MiB m = held(0, j.pid); m > 0) least = std::min(least, m), most = std::max(most, m);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_LT(least, 1000);
  EXPECT_EQ(least % 200, 0) << least;  // one of the steps
  EXPECT_EQ(most, 1000);
  EXPECT_EQ(wait(j), 0) << slurp(j.err);
}

TEST_F(FakeJob, JobThatDoesNotFitDiesOfOom) {
  ASSERT_TRUE(state_->allocate(0, static_cast<std::uint32_t>(getpid()), 3000));
  auto j = start({"--mem", "8000", "--smact", "0.5", "--seconds", "1", "--startup", "0"}, "0");
  ASSERT_GT(j.pid, 0);
  EXPECT_EQ(wait(j), 1);
  EXPECT_EQ(slurp(j.err),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8000 MiB (GPU 0; 10000 MiB total capacity; "
            "7000 MiB free)\n");
  EXPECT_EQ(state_->read(0).used_mib, 3000);
  // On its second GPU (device ordinal 1) after holding memory on the first: gives it back.
  auto k = start({"--mem", "8000", "--smact", "0.5", "--seconds", "1", "--startup", "0"}, "1,0");
  EXPECT_EQ(wait(k), 1);
  EXPECT_NE(slurp(k.err).find("(GPU 1; 10000 MiB total capacity; 7000 MiB free)"), std::string::npos) << slurp(k.err);
  EXPECT_EQ(state_->read(1).used_mib, 0);
}

// Next to a co-runner a job slows down by the emulated GPU's contention model (time
// slicing, contention.h) with its shipped parameters: both report that speed, and the short
// one takes at least its work / that speed. On separate GPUs, no slowdown.
TEST_F(FakeJob, CoLocatedJobsSlowDownByTheContentionModel) {
  // --smact 0.4: DRAM activity 0.2 and utilisation 0.48 alone (the fake job's defaults).
  const double u = 0.48, d = 0.2;
  const double k = emu::ContentionConfig{}.timeslice_overhead;
  const double s = 1 / ((1 - u) + u * (1 + k * std::min(1.0, u)) * std::max(1.0, u + u));  // contention.h
  ASSERT_LT(s, 0.9);  // a slowdown the checks below can see
  auto job = [&](const char* seconds) {
    return std::vector<std::string>{"--mem", "1000", "--smact", "0.4", "--seconds", seconds, "--startup", "0"};
  };
  // Apart (one GPU each): each shows its solo activity, at speed 1.
  auto a = start(job("600"), "0");
  auto b = start(job("600"), "1");
  ASSERT_TRUE(wait_drama(0, d)) << state_->read(0).activity.drama;
  ASSERT_TRUE(wait_drama(1, d)) << state_->read(1).activity.drama;
  kill(b.pid, SIGTERM);
  EXPECT_EQ(wait(b), 143);
  // Together on GPU 0: both report speed s while the short one runs (2 / s seconds), and
  // it takes at least 2 / s.
  auto c = start(job("2"), "0");
  EXPECT_TRUE(wait_drama(0, 2 * d * s)) << state_->read(0).activity.drama << " != " << 2 * d * s;
  EXPECT_EQ(wait(c), 0) << slurp(c.err);
  EXPECT_GE(wall_of(slurp(c.out)), 2 / s - kPrinted) << slurp(c.out);
  // Alone again, the long one is back at speed 1.
  EXPECT_TRUE(wait_drama(0, d)) << state_->read(0).activity.drama;
  kill(a.pid, SIGTERM);
  EXPECT_EQ(wait(a), 143);
}

// The parameters come from the model's table and can be overridden for a trial: without
// the time-slice overhead two jobs that together ask for less than the GPU's time (0.96)
// do not slow each other. A bad override is refused with one line.
TEST_F(FakeJob, ContentionParametersCanBeOverridden) {
  const std::vector<std::string> args{"--mem", "1000", "--smact", "0.4", "--seconds", "600", "--startup", "0"};
  const std::vector<std::string> off{"AEGIS_EMULATED_CONTENTION=timeslice_overhead=0"};
  auto a = start(args, "0", off);
  ASSERT_TRUE(wait_drama(0, 0.2));
  auto b = start(args, "0", off);
  ASSERT_TRUE(wait_held(0, b.pid, 1000));
  // Both registered, both at speed 1: 0.2 + 0.2, and it stays there.
  EXPECT_TRUE(eventually([&] { return state_->read(0).process_count == 2; }));
  EXPECT_TRUE(wait_drama(0, 0.4)) << state_->read(0).activity.drama;
  kill(a.pid, SIGTERM);
  kill(b.pid, SIGTERM);
  EXPECT_EQ(wait(a), 143);
  EXPECT_EQ(wait(b), 143);
  auto bad = start({"--mem", "10", "--smact", "0.1", "--seconds", "0.1"}, "0",
                   {"AEGIS_EMULATED_CONTENTION=timeslice_overhead=-1"});
  EXPECT_EQ(wait(bad), 2);
  EXPECT_EQ(slurp(bad.err),
            "aegis-fakejob: AEGIS_EMULATED_CONTENTION: timeslice_overhead: -1 is out of range [0, 100]\n");
}

TEST_F(FakeJob, SigtermReleasesAndExits143) {
  auto j = start({"--mem", "500", "--smact", "0.5", "--seconds", "30", "--startup", "0"});
  ASSERT_GT(j.pid, 0);
  ASSERT_TRUE(wait_held(0, j.pid, 500));
  kill(j.pid, SIGTERM);
  // Exited but not reaped: its entries must be gone by its own hand (a zombie counts as alive).
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(j.pid), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(held(0, j.pid), 0);
  EXPECT_EQ(wait(j), 143);
}

TEST_F(FakeJob, BadSetupExitsTwoWithOneLine) {
  auto j = start({"--mem", "500", "--smact", "2", "--seconds", "1"});
  EXPECT_EQ(wait(j), 2);
  EXPECT_EQ(slurp(j.err), "aegis-fakejob: --smact: '2' is not a number in [0, 1]\n");
  auto k = start({"--mem", "500", "--smact", "0.5", "--seconds", "1"}, "7");
  EXPECT_EQ(wait(k), 2);
  EXPECT_NE(slurp(k.err).find("CUDA_VISIBLE_DEVICES: '7' names no emulated GPU"), std::string::npos);
  unsetenv("AEGIS_EMULATED_STATE");
  auto m = start({"--mem", "500", "--smact", "0.5", "--seconds", "1"});
  EXPECT_EQ(wait(m), 2);
  EXPECT_EQ(slurp(m.err), "aegis-fakejob: AEGIS_EMULATED_STATE is not set: no emulated GPUs to run on\n");
}

// --- MIG ------------------------------------------------------------------------------

// Two A100-40GB (40960 MiB): GPU 0 cut into 4g.20gb, 2g.10gb and 1g.5gb instances (20096,
// 9984 and 4864 MiB, 56, 28 and 14 of 108 SMs: core/mig_models.h); GPU 1 whole.
class FakeJobMig : public FakeJob {
 protected:
  MiB gpu_mib() const override { return 40960; }
  void SetUp() override {
    FakeJob::SetUp();
    std::string error;
    const auto layout = emu::parse_mig_layout("0:4g.20gb,2g.10gb,1g.5gb", &error);
    ASSERT_TRUE(layout && state_->set_mig(*layout, &error)) << error;
  }
};

TEST_F(FakeJobMig, JobOnAMigUuidRunsOnTheInstance) {
  const int two_g = emu::mig_device(0, 1);
  auto j = start({"--mem", "1500", "--smact", "0.5", "--seconds", "0.4", "--startup", "0"},
                 emu::emulated_mig_uuid(0, 1).c_str());
  ASSERT_GT(j.pid, 0);
  ASSERT_TRUE(wait_held(two_g, j.pid, 1500));
  EXPECT_EQ(state_->read(0).used_mib, 1500);  // its GPU holds what its instances hold
  EXPECT_EQ(state_->read(emu::mig_device(0, 0)).used_mib, 0);
  // On 28 of 108 SMs a job busy 0.6 of its time runs at 1 / (0.4 + 0.6 * 108/28) = 0.368
  // (the simulator's rule too); the instance shows 0.5 * 0.368 / (28/108) = 0.71 SM activity.
  const double share = 28.0 / 108, speed = 1 / (0.4 + 0.6 / share);
  EXPECT_TRUE(wait_smact(two_g, 0.5 * speed / share)) << state_->read(two_g).activity.smact;
  EXPECT_EQ(wait(j), 0) << slurp(j.err);
  EXPECT_GE(wall_of(slurp(j.out)), 0.4 / speed - kPrinted) << slurp(j.out);
  EXPECT_EQ(state_->read(0).used_mib, 0);
}

TEST_F(FakeJobMig, InstanceMemoryLimitsTheJob) {
  // The GPU has 40960 MiB free, its 2g.10gb instance 9984: CUDA sees the instance only.
  auto j = start({"--mem", "12000", "--smact", "0.5", "--seconds", "1", "--startup", "0"},
                 emu::emulated_mig_uuid(0, 1).c_str());
  EXPECT_EQ(wait(j), 1);
  EXPECT_EQ(slurp(j.err),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12000 MiB (GPU 0; 9984 MiB total capacity; "
            "9984 MiB free)\n");
  // Named by its index (or UUID), a GPU in MIG mode gives its first instance, as in CUDA;
  // and a process sees one MIG instance only: the 1g.5gb listed second stays invisible.
  auto k = start({"--mem", "4000", "--smact", "0.1", "--seconds", "0.3", "--startup", "0"},
                 ("0," + emu::emulated_mig_uuid(0, 2)).c_str());
  ASSERT_TRUE(wait_held(emu::mig_device(0, 0), k.pid, 4000));
  EXPECT_EQ(held(emu::mig_device(0, 2), k.pid), 0);
  EXPECT_EQ(wait(k), 0) << slurp(k.err);
  // CUDA 11's form, MIG-GPU-<uuid>/<GPU instance id>/<compute instance id>: the 1g.5gb.
  auto l = start({"--mem", "6000", "--smact", "0.1", "--seconds", "0.1", "--startup", "0"},
                 "MIG-GPU-aeg15000-0000-0000-0000-000000000000/3/0");
  EXPECT_EQ(wait(l), 1);
  EXPECT_NE(slurp(l.err).find("(GPU 0; 4864 MiB total capacity; 4864 MiB free)"), std::string::npos) << slurp(l.err);
  auto m = start({"--mem", "100", "--smact", "0.1", "--seconds", "0.1"}, "MIG-aeg15000-0000-0000-0000-000000000100");
  EXPECT_EQ(wait(m), 2);
  EXPECT_NE(slurp(m.err).find("names no emulated GPU"), std::string::npos) << slurp(m.err);
}

// --- MPS ------------------------------------------------------------------------------

// A job past its CUDA_MPS_PINNED_DEVICE_MEM_LIMIT dies as of OOM although the GPU has
// room; its neighbour on the GPU is not disturbed.
TEST_F(FakeJob, MpsMemoryLimitIsAnOom) {
  auto n = start({"--mem", "3000", "--smact", "0.3", "--seconds", "1", "--startup", "0"}, "1",
                 {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4G"});
  ASSERT_TRUE(wait_held(1, n.pid, 3000));
  auto j = start({"--mem", "2000", "--smact", "0.5", "--seconds", "1", "--startup", "0"}, "0,1",
                 {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4G,1=1000M"});
  EXPECT_EQ(wait(j), 1);
  EXPECT_EQ(slurp(j.err),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2000 MiB (GPU 1; 1000 MiB total capacity; "
            "1000 MiB free)\n");
  EXPECT_EQ(state_->read(0).used_mib, 0);  // what it held on GPU 0 is given back
  auto k = start({"--mem", "600", "--smact", "0.5", "--seconds", "0.2", "--startup", "0", "--ramp", "0.1"}, "1",
                 {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=500M"});  // one limit for every device; fails mid-ramp
  EXPECT_EQ(wait(k), 1);
  EXPECT_NE(slurp(k.err).find("(GPU 0; 500 MiB total capacity; 20 MiB free)"), std::string::npos) << slurp(k.err);
  EXPECT_EQ(wait(n), 0) << slurp(n.err);
  EXPECT_GE(wall_of(slurp(n.out)), 1.0 - kPrinted) << slurp(n.out);
  auto bad = start({"--mem", "100", "--smact", "0.1", "--seconds", "0.1"}, "0", {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=100"});
  EXPECT_EQ(wait(bad), 2);
  EXPECT_NE(slurp(bad.err).find("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: '100' is not a limit"), std::string::npos);
}

// An MPS client with half the threads: 1 / (0.4 + 0.6 / 0.5) = 0.625 of its speed, and the
// SM activity that goes with it.
TEST_F(FakeJob, MpsThreadPercentageSlowsTheJob) {
  auto j = start({"--mem", "100", "--smact", "0.5", "--seconds", "0.5", "--startup", "0"}, "0",
                 {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"});
  ASSERT_TRUE(wait_held(0, j.pid, 100));
  EXPECT_TRUE(wait_smact(0, 0.5 * 0.625)) << state_->read(0).activity.smact;
  EXPECT_EQ(wait(j), 0) << slurp(j.err);
  EXPECT_GE(wall_of(slurp(j.out)), 0.5 / 0.625 - kPrinted) << slurp(j.out);
}

// The MPS client connects to the control daemon named by CUDA_MPS_PIPE_DIRECTORY, which the
// emulated nvidia-cuda-mps-control starts (-d) and stops (quit on its stdin).
TEST_F(FakeJob, MpsClientNeedsTheControlDaemon) {
  // Built next to the fake job, in a directory of its own (apps/aegis-fakejob/CMakeLists.txt).
  const std::string dir = test::temp_path("mps"), fakejob = AEGIS_FAKEJOB;
  const std::string tool = fakejob.substr(0, fakejob.rfind('/')) + "/mps-bin/nvidia-cuda-mps-control";
  const std::string env = "CUDA_MPS_PIPE_DIRECTORY=" + dir + "/pipe CUDA_MPS_LOG_DIRECTORY=" + dir + "/log ";
  const std::vector<std::string> args{"--mem", "100", "--smact", "0.2", "--seconds", "0.1", "--startup", "0"};
  auto j = start(args, "0", {"CUDA_MPS_PIPE_DIRECTORY=" + dir + "/pipe"});
  EXPECT_EQ(wait(j), 1);
  EXPECT_NE(slurp(j.err).find("RuntimeError: CUDA error: MPS client failed to connect to the MPS control daemon"),
            std::string::npos)
      << slurp(j.err);
  EXPECT_EQ(state_->read(0).process_count, 0);  // it failed before its first allocation

  struct Stop {  // whatever fails below, no daemon outlives the test
    std::string quit, dir;
    ~Stop() {
      if (access((dir + "/pipe/control").c_str(), F_OK) == 0) (void)!std::system(quit.c_str());
      (void)!std::system(("rm -rf '" + dir + "'").c_str());
    }
  } stop{"echo quit | " + env + tool + " 2>/dev/null", dir};
  ASSERT_EQ(std::system((env + tool + " -d").c_str()), 0);
  EXPECT_NE(std::system((env + tool + " -d 2>/dev/null").c_str()), 0);  // one daemon per pipe directory
  auto k = start(args, "0", {"CUDA_MPS_PIPE_DIRECTORY=" + dir + "/pipe"});
  const pid_t client = k.pid;
  EXPECT_EQ(wait(k), 0) << slurp(k.err);
  EXPECT_NE(slurp(dir + "/log/control.log").find("NEW CLIENT " + std::to_string(client) + " from user"), std::string::npos)
      << slurp(dir + "/log/control.log");
  ASSERT_EQ(std::system(stop.quit.c_str()), 0);
  EXPECT_NE(access((dir + "/pipe/control").c_str(), F_OK), 0);  // it cleans up as it goes
  EXPECT_NE(slurp(dir + "/log/control.log").find("Received quit command"), std::string::npos);
  auto m = start(args, "0", {"CUDA_MPS_PIPE_DIRECTORY=" + dir + "/pipe"});
  EXPECT_EQ(wait(m), 1);
}

// NVIDIA's control daemon runs one MPS server per user at a time: a client of another user
// waits until every client of the running server is gone (man nvidia-cuda-mps-control).
// Other users' clients are announced on the FIFO as the CUDA library does ("client PID UID"),
// for processes of this test standing in for them.
TEST_F(FakeJob, MpsServesOneUserAtATime) {
  const std::string dir = test::temp_path("mps1u"), fakejob = AEGIS_FAKEJOB;
  const std::string tool = fakejob.substr(0, fakejob.rfind('/')) + "/mps-bin/nvidia-cuda-mps-control";
  const std::string env = "CUDA_MPS_PIPE_DIRECTORY=" + dir + "/pipe CUDA_MPS_LOG_DIRECTORY=" + dir + "/log ";
  struct Stop {
    std::string quit, dir;
    std::vector<pid_t> kids;
    ~Stop() {
      for (pid_t k : kids)
        if (kill(k, SIGKILL) == 0) waitpid(k, nullptr, 0);
      if (access((dir + "/pipe/control").c_str(), F_OK) == 0) (void)!std::system(quit.c_str());
      (void)!std::system(("rm -rf '" + dir + "'").c_str());
    }
  } stop{"echo quit | " + env + tool + " 2>/dev/null", dir, {}};
  ASSERT_EQ(std::system((env + tool + " -d").c_str()), 0);
  const std::string log = dir + "/log/control.log";
  auto stand_in = [&](unsigned uid) {  // a live process announced as a client of `uid`
    const pid_t p = fork();
    if (p == 0) {
      pause();
      _exit(0);
    }
    stop.kids.push_back(p);
    const std::string line = "client " + std::to_string(p) + " " + std::to_string(uid) + "\n";
    const int fd = open((dir + "/pipe/control").c_str(), O_WRONLY | O_CLOEXEC);
    EXPECT_EQ(write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    close(fd);
    return p;
  };
  auto granted = [&](pid_t p) { return access((dir + "/pipe/granted." + std::to_string(p)).c_str(), F_OK) == 0; };
  auto logged = [&](const std::string& text) { return slurp(log).find(text) != std::string::npos; };
  auto end = [&](pid_t p) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  };

  const pid_t a1 = stand_in(1001);
  ASSERT_TRUE(eventually([&] { return granted(a1); })) << slurp(log);
  const pid_t b1 = stand_in(1002);
  ASSERT_TRUE(eventually([&] { return logged("Client " + std::to_string(b1) + " of user 1002 waits"); })) << slurp(log);
  EXPECT_FALSE(granted(b1));  // decided with the log line: not let in
  const pid_t a2 = stand_in(1001);  // the running server's user: in at once
  ASSERT_TRUE(eventually([&] { return granted(a2); })) << slurp(log);
  EXPECT_FALSE(granted(b1));
  // This test's own user's job (a real client) waits as well, before its first allocation.
  auto k = start({"--mem", "100", "--smact", "0.2", "--seconds", "0.1", "--startup", "0"}, "0",
                 {"CUDA_MPS_PIPE_DIRECTORY=" + dir + "/pipe"});
  ASSERT_TRUE(eventually([&] { return logged("Client " + std::to_string(k.pid) + " of user"); })) << slurp(log);
  EXPECT_EQ(state_->read(0).process_count, 0);
  end(a1);
  EXPECT_FALSE(granted(b1));  // one client of user 1001 is still there
  end(a2);
  // The server of user 1001 is gone: the first waiting user's server starts, then the next.
  ASSERT_TRUE(eventually([&] { return granted(b1); })) << slurp(log);
  EXPECT_TRUE(logged("Server of user 1001 exited")) << slurp(log);
  EXPECT_TRUE(logged("Starting new server for user 1002")) << slurp(log);
  EXPECT_FALSE(granted(k.pid));
  end(b1);
  EXPECT_EQ(wait(k), 0) << slurp(k.err);
}

// --- the contention model -------------------------------------------------------------

// The rules of contention.h, from its formulas: alone no slowdown, a light pair slowed by
// the time-slice overhead only, a pair that oversubscribes the GPU stretched by its demand,
// more co-runners slower; MPS kernels side by side slowed only by oversubscribed SMs or
// DRAM and never below time slicing; a smaller SM share stretches the busy time.
TEST(Contention, RulesFollowTheFormulas) {
  const emu::ContentionConfig c;
  const double k = c.timeslice_overhead;
  EXPECT_EQ(emu::timesliced_speed(c, 0.7, 0), 1.0);
  EXPECT_EQ(emu::timesliced_speed(c, 0, 0.7), 1.0);
  EXPECT_NEAR(emu::timesliced_speed(c, 0.3, 0.4), 1 / (0.7 + 0.3 * (1 + k * 0.4)), 1e-12);
  EXPECT_NEAR(emu::timesliced_speed(c, 0.8, 0.6), 1 / (0.2 + 0.8 * (1 + k * 0.6) * 1.4), 1e-12);
  EXPECT_NEAR(emu::timesliced_speed(c, 0.5, 1.5), 1 / (0.5 + 0.5 * (1 + k) * 2.0), 1e-12);
  EXPECT_LT(emu::timesliced_speed(c, 0.5, 0.9), emu::timesliced_speed(c, 0.5, 0.3));
  const emu::ContentionConfig none{0};
  EXPECT_EQ(emu::timesliced_speed(none, 0.3, 0.4), 1.0);  // the GPU's time suffices: only the overhead slows
  EXPECT_NEAR(emu::timesliced_speed(none, 1, 1), 0.5, 1e-12);  // two saturating jobs halve each other

  const emu::Activity self{0.3, 0.15, 0.2, 0.36};
  const emu::CoRunners others{0.4, 0.3, 0.35};  // util, drama, smact
  const double sliced = emu::timesliced_speed(c, 0.36, 0.4);
  EXPECT_NEAR(emu::speed_on_device(c, self, others, {}), sliced, 1e-12);
  EXPECT_NEAR(emu::speed_on_device(c, self, others, {1, 1, true}), 1.0, 1e-12);  // 0.65 SMs, 0.5 DRAM: room
  const emu::CoRunners heavy{0.9, 1.1, 0.9};
  EXPECT_NEAR(emu::speed_on_device(c, self, heavy, {1, 1, true}),
              std::max(emu::timesliced_speed(c, 0.36, 0.9), 1 / 1.3), 1e-12);  // DRAM 0.2 + 1.1 oversubscribed
  EXPECT_NEAR(emu::speed_on_device(c, self, {}, {2.0 / 7, 1, false}), 1 / (0.64 + 0.36 * 3.5), 1e-12);
}

TEST(Contention, ParametersFromText) {
  emu::ContentionConfig c;
  emu::set_params(c, "timeslice_overhead=1.25");
  EXPECT_EQ(c.timeslice_overhead, 1.25);
  EXPECT_THROW(emu::set_params(c, "timeslice_overhead"), ConfigError);
  EXPECT_THROW(emu::set_params(c, "overhead=1"), ConfigError);
  EXPECT_THROW(emu::set_params(c, "timeslice_overhead=x"), ConfigError);
  EXPECT_EQ(c.timeslice_overhead, 1.25);  // a refused text changes nothing
  ASSERT_EQ(emu::describe(c).size(), emu::contention_param_table().size());
  EXPECT_EQ(emu::describe(c)[0].name, "timeslice_overhead");
}

// The fit recovers known parameters from pairs the model itself generated.
TEST(Contention, FitRecoversKnownParameters) {
  const std::vector<double> demand{0.1, 0.3, 0.45, 0.6, 0.8, 0.95};
  const emu::ContentionConfig truth{1.7};
  std::vector<emu::GavelPair> pairs;
  for (std::size_t a = 0; a < demand.size(); ++a)
    for (std::size_t b = a; b < demand.size(); ++b)
      pairs.push_back({a, b, emu::timesliced_speed(truth, demand[a], demand[b]),
                       emu::timesliced_speed(truth, demand[b], demand[a])});
  const auto fit = emu::fit_contention(pairs, demand.size());
  EXPECT_NEAR(fit.timeslice_overhead, 1.7, 1e-3);
  for (std::size_t i = 0; i < demand.size(); ++i) EXPECT_NEAR(fit.demand[i], demand[i], 1e-3) << i;
  EXPECT_LT(fit.rmse, 1e-4);
}

// The shipped overhead is the fit on Gavel's V100 pairs (`aegis calibrate --emulated`), and
// the fit explains the pairs better than no contention at all.
TEST(Contention, ShippedOverheadIsTheFitOnGavelV100Pairs) {
  const std::string path = std::string(AEGIS_SOURCE_DIR) + "/data/interference/gavel_simulation_throughputs.json";
  const auto data = emu::load_gavel_pairs(path, "v100");
  EXPECT_EQ(data.jobs.size(), 26u);
  EXPECT_GT(data.pairs.size(), 300u);
  const auto fit = emu::fit_contention(data.pairs, data.jobs.size());
  EXPECT_NEAR(fit.timeslice_overhead, emu::ContentionConfig{}.timeslice_overhead, 0.005);
  EXPECT_LT(fit.rmse, fit.rmse_no_model / 2);
}

}  // namespace
