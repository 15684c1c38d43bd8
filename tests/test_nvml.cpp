// The NVML loader against the emulated library (exactly the code path of the real driver),
// and the emulated GPUs' rules: memory, processes, activity, telemetry levels, OOM, killed
// processes, the INSUFFICIENT_SIZE retry, energy, MIG instances.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <set>
#include <sys/file.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "runtime/gpu/emulated/device_ids.h"
#include "runtime/gpu/emulated/state.h"
#include "runtime/gpu/emulated/state_layout.h"
#include "runtime/gpu/gpu_source.h"
#include "sim/sim_config.h"
#include "tests/test_util.h"

namespace {

using namespace aegis;

const std::string kLibrary = AEGIS_EMULATED_NVML;

// Emulated GPUs in a state file unique to this process and test; the library reads the
// environment at nvmlInit, so each test opens its own source.
class EmulatedGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    state_path_ = test::temp_path("gpus.state");
    std::remove(state_path_.c_str());
    setenv("AEGIS_EMULATED_STATE", state_path_.c_str(), 1);
    setenv("AEGIS_EMULATED_GPUS", "3x40960", 1);
    for (const char* v : {"AEGIS_EMULATED_GPM", "AEGIS_EMULATED_PROCESS_API", "AEGIS_EMULATED_PROCESS_MEMORY",
                          "AEGIS_EMULATED_MIG", "AEGIS_EMULATED_PROCESS_UTIL"})
      unsetenv(v);
  }
  void TearDown() override {
    for (const char* v : {"AEGIS_EMULATED_STATE", "AEGIS_EMULATED_GPUS", "AEGIS_EMULATED_GPM", "AEGIS_EMULATED_PROCESS_API",
                          "AEGIS_EMULATED_PROCESS_MEMORY", "AEGIS_EMULATED_MIG", "AEGIS_EMULATED_PROCESS_UTIL"})
      unsetenv(v);
    std::remove(state_path_.c_str());
  }

  std::unique_ptr<GpuSource> open() {
    std::string error;
    auto s = open_nvml(kLibrary, &error);
    EXPECT_TRUE(s) << error;
    return s;
  }
  // A client of the shared state, as a fake job is.
  std::unique_ptr<emu::State> client() {
    std::string error;
    auto s = emu::State::open(state_path_, {}, &error);
    EXPECT_TRUE(s) << error;
    return s;
  }

  std::string state_path_;
};

std::uint32_t self() { return static_cast<std::uint32_t>(getpid()); }

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Forks a child that allocates `mib` on `gpu` (a device id) as itself, tells the parent, and
// waits to be killed.
pid_t spawn_holder(const std::string& path, int gpu, MiB mib) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    std::string error;
    auto s = emu::State::open(path, {}, &error);
    const char ok = s && s->allocate(gpu, static_cast<std::uint32_t>(getpid()), mib) ? 'y' : 'n';
    if (write(fds[1], &ok, 1) != 1) _exit(3);
    for (;;) pause();
  }
  char ok = 'n';
  const bool got = read(fds[0], &ok, 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return got && ok == 'y' ? pid : -1;
}

void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(Nvml, MissingLibraryIsACleanError) {
  std::string error;
  EXPECT_FALSE(open_nvml("/nonexistent/libnvidia-ml.so.1", &error));
  EXPECT_NE(error.find("cannot load NVML from '/nonexistent/libnvidia-ml.so.1'"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST(Nvml, LibraryWithoutNvmlIsACleanError) {
  std::string error;
  EXPECT_FALSE(open_nvml("libm.so.6", &error));
  EXPECT_NE(error.find("lacks nvmlInit_v2"), std::string::npos) << error;
}

TEST(Nvml, PowerModelIsTheSimulators) {
  EXPECT_EQ(emu::kPowerIdleW, SimConfig{}.power_idle_w);
  EXPECT_EQ(emu::kPowerMaxW, SimConfig{}.power_max_w);
}

TEST_F(EmulatedGpus, InitFailureIsACleanError) {
  unsetenv("AEGIS_EMULATED_STATE");
  std::string error;
  EXPECT_FALSE(open_nvml(kLibrary, &error));
  EXPECT_NE(error.find("failed to initialise"), std::string::npos) << error;
  EXPECT_NE(error.find("AEGIS_EMULATED_STATE is not set"), std::string::npos) << error;
  setenv("AEGIS_EMULATED_STATE", state_path_.c_str(), 1);
  setenv("AEGIS_EMULATED_GPUS", "3x", 1);
  EXPECT_FALSE(open_nvml(kLibrary, &error));
  EXPECT_NE(error.find("AEGIS_EMULATED_GPUS: '3x'"), std::string::npos) << error;
}

TEST_F(EmulatedGpus, EnumeratesGpus) {
  setenv("AEGIS_EMULATED_GPUS", "2x40960,1x81920", 1);
  auto src = open();
  ASSERT_TRUE(src);
  const auto gpus = src->sample();
  ASSERT_EQ(gpus.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& g = gpus[static_cast<std::size_t>(i)];
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.uuid, "GPU-aeg15000-0000-0000-0000-00000000000" + std::to_string(i));
    EXPECT_EQ(g.total_mib, i < 2 ? 40960 : 81920);
    EXPECT_EQ(g.free_mib, g.total_mib);
    EXPECT_EQ(g.used_mib, 0);
    EXPECT_FALSE(g.name.empty());
    EXPECT_FALSE(g.mig_enabled);
    EXPECT_TRUE(g.processes.empty());
    ASSERT_TRUE(g.power_w);
    EXPECT_DOUBLE_EQ(*g.power_w, 50);  // idle
  }
  const auto d = src->describe();
  EXPECT_EQ(d.find("NVML "), 0u) << d;
  EXPECT_NE(d.find("via " + kLibrary + ", 3 GPUs, GPM: yes"), std::string::npos) << d;
}

TEST_F(EmulatedGpus, ProcessesAppearWithMemoryAndActivity) {
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  ASSERT_TRUE(c->allocate(0, self(), 1000));
  ASSERT_TRUE(c->allocate(0, self(), 24));
  ASSERT_TRUE(c->set_activity(0, self(), {0.6, 0.3, 0.2, 0.7}));
  auto first = src->sample();
  // GPM needs two samples: the first has coarse utilisation only.
  EXPECT_FALSE(first[0].smact);
  EXPECT_EQ(first[0].level(), TelemetryLevel::Coarse);
  pause_ms(30);
  const auto gpus = src->sample();
  const auto& g = gpus[0];
  EXPECT_EQ(g.used_mib, 1024);
  EXPECT_EQ(g.free_mib, 40960 - 1024);
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_EQ(g.processes[0].pid, self());
  EXPECT_EQ(g.processes[0].used_mib, 1024);
  EXPECT_EQ(g.level(), TelemetryLevel::Full);
  EXPECT_NEAR(*g.smact, 0.6, 1e-6);
  EXPECT_NEAR(*g.smocc, 0.3, 1e-6);
  EXPECT_NEAR(*g.drama, 0.2, 1e-6);
  EXPECT_NEAR(*g.util, 0.7, 0.005);
  EXPECT_NEAR(*g.power_w, 50 + 350 * 0.6, 0.01);
  EXPECT_EQ(gpus[1].level(), TelemetryLevel::Full);  // idle, but measured
  EXPECT_EQ(*gpus[1].smact, 0);
  EXPECT_TRUE(gpus[1].processes.empty());

  // Speed-weighted sum of the active processes, capped at 1; utilisation (share of busy
  // time) is their union (the simulator's rule, sim.util_combination).
  const pid_t other = spawn_holder(state_path_, 0, 1000);
  ASSERT_GT(other, 0);
  ASSERT_TRUE(c->set_activity(0, static_cast<std::uint32_t>(other), {0.8, 0.5, 0.4, 0.9}, 0.5));
  src->sample();
  pause_ms(30);
  const auto shared = src->sample()[0];
  EXPECT_NEAR(*shared.smact, 0.6 + 0.5 * 0.8, 1e-6);
  EXPECT_NEAR(*shared.smocc, 0.3 + 0.5 * 0.5, 1e-6);
  // 0.835, not 0.7 + 0.45 capped; NVML reports utilisation in whole percent.
  EXPECT_NEAR(*shared.util, 1 - (1 - 0.7) * (1 - 0.45), 0.005 + 1e-9);
  EXPECT_EQ(shared.processes.size(), 2u);
  const auto co = c->co_runners(0, self());
  EXPECT_DOUBLE_EQ(co.util, 0.9);  // solo values, as the interference model takes them
  EXPECT_DOUBLE_EQ(co.drama, 0.4);
  kill_and_reap(other);
  c->release(self());
  EXPECT_TRUE(src->sample()[0].processes.empty());
}

TEST_F(EmulatedGpus, CoarseOnlyWithoutGpm) {
  {
    auto src = open();
    ASSERT_TRUE(src);
    EXPECT_NE(src->describe().find("GPM: yes"), std::string::npos);
  }
  // The library rereads the environment once every source has let it go.
  setenv("AEGIS_EMULATED_GPM", "0", 1);
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  EXPECT_NE(src->describe().find("GPM: no"), std::string::npos) << src->describe();
  ASSERT_TRUE(c->set_activity(1, self(), {0.6, 0.3, 0.2, 0.7}));
  src->sample();
  pause_ms(20);
  const auto g = src->sample()[1];
  EXPECT_FALSE(g.smact || g.smocc || g.drama);
  EXPECT_NEAR(*g.util, 0.7, 0.005);
  EXPECT_EQ(g.level(), TelemetryLevel::Coarse);
}

// An MPS client is in NVML's MPS process list and, as on the H200's driver (nvml-calls/), in
// the compute list too: the loader sees it either way, and marks it a client where the
// driver has the v3 MPS call.
TEST_F(EmulatedGpus, MpsClientsAreSeenThroughTheMpsProcessList) {
  for (const char* api : {"3", "2"}) {
    SCOPED_TRACE(std::string("process API v") + api);
    setenv("AEGIS_EMULATED_PROCESS_API", api, 1);
    auto src = open();
    auto c = client();
    ASSERT_TRUE(src && c);
    const pid_t plain = spawn_holder(state_path_, 0, 500), mps = spawn_holder(state_path_, 0, 700);
    ASSERT_GT(plain, 0);
    ASSERT_GT(mps, 0);
    c->mark_mps_client(static_cast<std::uint32_t>(mps));
    std::set<std::uint32_t> pids;
    const auto devs = src->sample();
    for (const auto& p : devs[0].processes) pids.insert(p.pid);
    EXPECT_TRUE(pids.count(static_cast<std::uint32_t>(plain)));
    EXPECT_EQ(pids.count(static_cast<std::uint32_t>(mps)), 1u);
    for (const auto& p : devs[0].processes)
      if (p.pid == static_cast<std::uint32_t>(mps)) {
        EXPECT_EQ(p.mps_client, std::string(api) == "3");
      }
    kill_and_reap(plain);
    kill_and_reap(mps);
  }
}

TEST_F(EmulatedGpus, AllocationBeyondCapacityFails) {
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  MiB free = 0;
  ASSERT_TRUE(c->allocate(2, self(), 40000, &free));
  EXPECT_EQ(free, 960);
  EXPECT_FALSE(c->allocate(2, self(), 961, &free));
  EXPECT_EQ(free, 960);
  EXPECT_TRUE(c->allocate(2, self(), 960));
  EXPECT_FALSE(c->allocate(2, self(), 1));
  EXPECT_FALSE(c->allocate(3, self(), 1));  // no such GPU
  const auto g = src->sample()[2];
  EXPECT_EQ(g.used_mib, 40960);
  EXPECT_EQ(g.free_mib, 0);
}

TEST_F(EmulatedGpus, KilledProcessFreesItsMemory) {
  auto src = open();
  ASSERT_TRUE(src);
  const pid_t child = fork();
  if (child == 0) {
    std::string error;
    auto s = emu::State::open(state_path_, {}, &error);
    if (!s || !s->allocate(1, static_cast<std::uint32_t>(getpid()), 5000)) _exit(1);
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child could not allocate";
  const auto g = src->sample()[1];
  EXPECT_EQ(g.used_mib, 0);
  EXPECT_TRUE(g.processes.empty());
}

TEST_F(EmulatedGpus, HolderKilledWithTheLockDoesNotBlockOthers) {
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  const pid_t child = fork();
  if (child == 0) {
    std::string error;
    auto s = emu::State::open(state_path_, {}, &error);
    if (!s || !s->allocate(0, static_cast<std::uint32_t>(getpid()), 3000)) _exit(1);
    const int fd = ::open(state_path_.c_str(), O_RDWR);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);  // the state's lock (state.h)
    raise(SIGKILL);  // dies holding it
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child could not set up";
  EXPECT_TRUE(c->allocate(0, self(), 100));  // the kernel let go of the dead holder's lock
  const auto g = src->sample()[0];
  EXPECT_EQ(g.used_mib, 100);
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_EQ(g.processes[0].pid, self());
}

// The loader's first process buffer has 8 entries: 12 processes force a retry.
TEST_F(EmulatedGpus, MoreProcessesThanTheFirstBuffer) {
  for (const char* api : {"3", "2", "1"}) {  // each listing version has its own layout
    SCOPED_TRACE(std::string("process API v") + api);
    setenv("AEGIS_EMULATED_PROCESS_API", api, 1);
    auto src = open();
    ASSERT_TRUE(src);
    std::set<std::uint32_t> pids;
    for (int i = 0; i < 12; ++i) {
      const pid_t p = spawn_holder(state_path_, 2, 10 + i);
      ASSERT_GT(p, 0);
      pids.insert(static_cast<std::uint32_t>(p));
    }
    const auto g = src->sample()[2];
    std::set<std::uint32_t> seen;
    MiB sum = 0;
    for (const auto& p : g.processes) {
      seen.insert(p.pid);
      ASSERT_TRUE(p.used_mib);
      sum += *p.used_mib;
    }
    EXPECT_EQ(seen, pids);
    EXPECT_EQ(sum, 12 * 10 + 66);
    EXPECT_EQ(g.used_mib, sum);
    for (auto p : pids) kill_and_reap(static_cast<pid_t>(p));
    EXPECT_TRUE(src->sample()[2].processes.empty());
  }
}

TEST_F(EmulatedGpus, ProcessMemoryNotAvailable) {
  setenv("AEGIS_EMULATED_PROCESS_MEMORY", "0", 1);
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  ASSERT_TRUE(c->allocate(0, self(), 500));
  const auto g = src->sample()[0];
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_FALSE(g.processes[0].used_mib);
  EXPECT_EQ(g.used_mib, 500);  // the GPU total is still known
}

// A job's CUDA context and loading model hold memory but run no kernel: its per-process
// sample is 0 until its activity starts (the anchor of its observation window).
TEST_F(EmulatedGpus, PerProcessSamplesShowKernelsNotContexts) {
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  ASSERT_TRUE(c->allocate(0, self(), 300));  // the context
  auto g = src->sample()[0];
  EXPECT_TRUE(g.process_samples);
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_EQ(g.processes[0].sm_util, 0.0);
  ASSERT_TRUE(c->allocate(0, self(), 8000));  // the model
  EXPECT_EQ(src->sample()[0].processes[0].sm_util, 0.0);
  ASSERT_TRUE(c->set_activity(0, self(), {0.6, 0.3, 0.2, 0.5}, 0.8));  // its kernels, slowed to 0.8
  g = src->sample()[0];
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_NEAR(*g.processes[0].sm_util, 0.4, 1e-9);
  EXPECT_FALSE(src->sample()[1].processes.size());
  c->release(self());
}

TEST_F(EmulatedGpus, PerProcessSamplesUnsupportedLeaveProcessesWithoutThem) {
  setenv("AEGIS_EMULATED_PROCESS_UTIL", "0", 1);
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  ASSERT_TRUE(c->allocate(0, self(), 300));
  ASSERT_TRUE(c->set_activity(0, self(), {0.6, 0.3, 0.2, 0.5}));
  for (int i = 0; i < 2; ++i) {  // asked once, then remembered as unsupported
    const auto g = src->sample()[0];
    EXPECT_FALSE(g.process_samples);
    ASSERT_EQ(g.processes.size(), 1u);
    EXPECT_FALSE(g.processes[0].sm_util);
  }
  c->release(self());
}

TEST_F(EmulatedGpus, EnergyIncreasesWithTime) {
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const double e0 = *src->sample()[0].energy_j;
  pause_ms(100);
  const double e1 = *src->sample()[0].energy_j;
  const double outer = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(e1 - e0, 50 * 0.1 - 0.002);  // idle power over at least the pause (mJ rounding)
  EXPECT_LE(e1 - e0, 50 * outer + 0.002);
  ASSERT_TRUE(c->set_activity(0, self(), {1, 0.5, 0.5, 1}));
  pause_ms(100);
  const auto g = src->sample()[0];
  EXPECT_GE(*g.energy_j - e1, 400 * 0.1 - 0.002);  // full SM activity: 400 W
  EXPECT_DOUBLE_EQ(*g.power_w, 400);
}

// --- MIG ------------------------------------------------------------------------------

constexpr const char* kLayout = "0:3g.20gb,2g.10gb,1g.5gb,1g.5gb;2:7g.40gb";

TEST_F(EmulatedGpus, MigInstancesAreListedInsteadOfTheirGpu) {
  setenv("AEGIS_EMULATED_MIG", kLayout, 1);
  auto src = open();
  ASSERT_TRUE(src);
  const auto devs = src->sample();
  ASSERT_EQ(devs.size(), 6u);  // 4 instances of GPU 0, GPU 1 whole, 1 instance of GPU 2
  struct Want {
    int index;
    std::string uuid, parent, profile;
    MiB total;
  };
  const std::string gpu0 = "GPU-aeg15000-0000-0000-0000-000000000000", gpu2 = "GPU-aeg15000-0000-0000-0000-000000000002";
  const Want want[] = {
      {0, "MIG-aeg15000-0000-0000-0000-000000000000", gpu0, "3g.20gb", 20096},
      {0, "MIG-aeg15000-0000-0000-0000-000000000001", gpu0, "2g.10gb", 9984},
      {0, "MIG-aeg15000-0000-0000-0000-000000000002", gpu0, "1g.5gb", 4864},
      {0, "MIG-aeg15000-0000-0000-0000-000000000003", gpu0, "1g.5gb", 4864},
      {1, "GPU-aeg15000-0000-0000-0000-000000000001", "", "", 40960},
      {2, "MIG-aeg15000-0000-0000-0000-000000000200", gpu2, "7g.40gb", 40320},
  };
  for (std::size_t i = 0; i < devs.size(); ++i) {
    SCOPED_TRACE("device " + std::to_string(i));
    const auto& d = devs[i];
    EXPECT_EQ(d.index, want[i].index);
    EXPECT_EQ(d.uuid, want[i].uuid);
    EXPECT_EQ(d.parent_uuid, want[i].parent);
    EXPECT_EQ(d.mig_profile, want[i].profile);
    EXPECT_EQ(d.total_mib, want[i].total);
    EXPECT_EQ(d.free_mib, want[i].total);
    EXPECT_FALSE(d.mig_enabled);
    EXPECT_EQ(d.process_samples, want[i].profile.empty());  // none on MIG, as on a real driver
    const bool mig = !want[i].profile.empty();
    if (mig) {
      EXPECT_EQ(d.name, "Aegis Emulated GPU 40960 MiB MIG " + want[i].profile);
    }
    EXPECT_EQ(d.util.has_value(), !mig);  // no utilisation counter on a MIG device
    EXPECT_EQ(d.power_w.has_value(), !mig);  // the whole GPU's, not copied to its instances
    EXPECT_EQ(d.energy_j.has_value(), !mig);
  }
  EXPECT_NE(src->describe().find(", 3 GPUs, GPM: yes, MIG on GPU 0 (4 instances), MIG on GPU 2 (1 instance)"),
            std::string::npos)
      << src->describe();
}

TEST_F(EmulatedGpus, MigInstanceMemoryIsItsOwn) {
  setenv("AEGIS_EMULATED_MIG", kLayout, 1);
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  const int small = emu::mig_device(0, 2);  // 1g.5gb
  MiB free = 0;
  EXPECT_FALSE(c->allocate(0, self(), 100));  // a GPU in MIG mode is no CUDA device
  ASSERT_TRUE(c->allocate(small, self(), 4800, &free));  // an A100-40GB's 1g.5gb: 4864 MiB
  EXPECT_EQ(free, 64);
  // The GPU as a whole has 35 GiB free, the instance 64 MiB: the instance decides.
  EXPECT_FALSE(c->allocate(small, self(), 65, &free));
  EXPECT_EQ(free, 64);
  EXPECT_EQ(c->read(0).total_mib - c->read(0).used_mib, 40960 - 4800);
  EXPECT_TRUE(c->allocate(emu::mig_device(0, 3), self(), 4864));  // its neighbour is untouched
  EXPECT_FALSE(c->allocate(emu::mig_device(0, 4), self(), 1));      // an empty slot
  const auto devs = src->sample();
  EXPECT_EQ(devs[2].used_mib, 4800);
  EXPECT_EQ(devs[2].free_mib, 64);
  EXPECT_EQ(devs[3].used_mib, 4864);
  EXPECT_EQ(devs[0].used_mib, 0);
}

TEST_F(EmulatedGpus, MigProcessAppearsOnlyOnItsInstance) {
  setenv("AEGIS_EMULATED_MIG", kLayout, 1);
  for (const char* api : {"3", "1"}) {
    SCOPED_TRACE(std::string("process API v") + api);
    setenv("AEGIS_EMULATED_PROCESS_API", api, 1);
    auto src = open();
    ASSERT_TRUE(src);
    const pid_t p = spawn_holder(state_path_, emu::mig_device(0, 1), 700);
    ASSERT_GT(p, 0);
    const auto devs = src->sample();
    for (std::size_t i = 0; i < devs.size(); ++i) {
      if (i != 1) {
        EXPECT_TRUE(devs[i].processes.empty()) << "device " << i;
        continue;
      }
      ASSERT_EQ(devs[i].processes.size(), 1u);
      EXPECT_EQ(devs[i].processes[0].pid, static_cast<std::uint32_t>(p));
      EXPECT_EQ(devs[i].processes[0].used_mib, 700);
    }
    kill_and_reap(p);
    EXPECT_TRUE(src->sample()[1].processes.empty());
  }
}

// GPM per instance (nvmlGpmMigSampleGet): activity relative to the instance's own SMs.
TEST_F(EmulatedGpus, MigInstanceActivityIsScaledToItsShare) {
  setenv("AEGIS_EMULATED_MIG", kLayout, 1);
  auto src = open();
  auto c = client();
  ASSERT_TRUE(src && c);
  // An A100-40GB's 3g.20gb: 42 of its 108 SMs (core/mig_models.h), not 3/7 of them.
  ASSERT_TRUE(c->set_activity(emu::mig_device(0, 0), self(), {0.3, 0.2, 0.6, 0.4}));
  src->sample();
  pause_ms(30);
  const auto g = src->sample()[0];
  EXPECT_EQ(g.level(), TelemetryLevel::Full);
  EXPECT_NEAR(*g.smact, 0.3 * 108 / 42, 1e-6);
  EXPECT_NEAR(*g.smocc, 0.2 * 108 / 42, 1e-6);
  EXPECT_NEAR(*g.drama, 1.0, 1e-6);  // 1.54, capped
  EXPECT_FALSE(g.util);
  EXPECT_EQ(*src->sample()[1].smact, 0);  // the 2g instance next to it is idle
  EXPECT_NEAR(c->read(0).power_w, 50 + 350 * 0.3, 1e-9);  // the GPU's power: its SMs as a whole
}

TEST_F(EmulatedGpus, MigWithoutGpmIsMemoryOnly) {
  setenv("AEGIS_EMULATED_MIG", kLayout, 1);
  setenv("AEGIS_EMULATED_GPM", "0", 1);
  auto src = open();
  ASSERT_TRUE(src);
  src->sample();
  const auto devs = src->sample();
  EXPECT_EQ(devs[0].level(), TelemetryLevel::MemoryOnly);
  EXPECT_EQ(devs[4].level(), TelemetryLevel::Coarse);  // GPU 1, whole
}

TEST_F(EmulatedGpus, MigMediaExtensionsAndH200InstancesHaveTheDriversMemory) {
  // A +me instance beside plain ones; an H200's 3g.71gb at the 69.75 GiB its driver lists.
  setenv("AEGIS_EMULATED_GPUS", "2x40960,1x143771", 1);
  setenv("AEGIS_EMULATED_MIG", "0:1g.5gb+me,1g.5gb;2:3g.71gb,1g.18gb+me", 1);
  auto src = open();
  ASSERT_TRUE(src);
  const auto devs = src->sample();
  ASSERT_EQ(devs.size(), 5u);  // 2 instances of GPU 0, GPU 1 whole, 2 instances of GPU 2
  EXPECT_EQ(devs[0].mig_profile, "1g.5gb+me");
  EXPECT_EQ(devs[0].total_mib, 4864);
  EXPECT_EQ(devs[1].mig_profile, "1g.5gb");
  EXPECT_EQ(devs[3].mig_profile, "3g.71gb");
  EXPECT_EQ(devs[3].total_mib, 71424);
  EXPECT_EQ(devs[4].mig_profile, "1g.18gb+me");
  EXPECT_EQ(devs[4].total_mib, 16384);
}

TEST_F(EmulatedGpus, MigModeWithoutInstancesListsNothing) {
  setenv("AEGIS_EMULATED_MIG", "1:", 1);
  auto src = open();
  ASSERT_TRUE(src);
  const auto devs = src->sample();
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[1].index, 2);
  EXPECT_NE(src->describe().find("MIG on GPU 1 (no instances)"), std::string::npos) << src->describe();
}

TEST_F(EmulatedGpus, MigLayoutPersistsAndChanges) {
  auto c = client();  // holds the file, as a running job does
  {
    setenv("AEGIS_EMULATED_MIG", kLayout, 1);
    auto src = open();
    ASSERT_TRUE(src && c);
    ASSERT_TRUE(c->allocate(emu::mig_device(2, 0), self(), 1000));
  }
  // A reader that only names the state (aegis-gpu-query, a job) sees the layout as it is.
  unsetenv("AEGIS_EMULATED_MIG");
  unsetenv("AEGIS_EMULATED_GPUS");
  {
    auto src = open();
    ASSERT_TRUE(src);
    EXPECT_EQ(src->sample().size(), 6u);
    EXPECT_EQ(c->read(emu::mig_device(2, 0)).used_mib, 1000);
  }
  // A new layout for GPU 2 starts it afresh; GPU 0's stays, with what runs there.
  ASSERT_TRUE(c->allocate(emu::mig_device(0, 1), self(), 10));
  setenv("AEGIS_EMULATED_MIG", "0:3g.20gb,2g.10gb,1g.5gb,1g.5gb;2:4g.20gb,3g.20gb", 1);
  {
    auto src = open();
    ASSERT_TRUE(src);
    EXPECT_EQ(src->sample().size(), 7u);
    EXPECT_EQ(c->read(emu::mig_device(0, 1)).used_mib, 10);
    EXPECT_EQ(c->read(emu::mig_device(2, 0)).used_mib, 0);
  }
  // A machine description without a layout turns MIG off.
  unsetenv("AEGIS_EMULATED_MIG");
  setenv("AEGIS_EMULATED_GPUS", "3x40960", 1);
  auto src = open();
  ASSERT_TRUE(src);
  EXPECT_EQ(src->sample().size(), 3u);
  EXPECT_EQ(c->read(0).used_mib, 0);
}

TEST_F(EmulatedGpus, BadMigLayoutsFailInit) {
  const std::pair<const char*, const char*> bad[] = {
      {"0:4g.20gb,4g.20gb", "GPU 0: its instances use 8 compute slices; an A100-40GB has 7"},
      // 7 compute slices, but two 4-slot instances and a third leave no memory for it
      {"0:3g.20gb,3g.20gb,1g.5gb", "GPU 0: no placement of its instances fits the 8 memory slices of an A100-40GB"},
      {"0:7g.80gb", "GPU 0: '7g.80gb' is not a MIG profile of the A100-40GB (1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb"},
      // one media-extensions instance per GPU, as the driver lists it (Total 1)
      {"0:1g.5gb+me,1g.5gb+me", "GPU 0: '1g.5gb+me' may have at most 1 instance on an A100-40GB"},
      {"0:1g.5gb+mf", "has '1g.5gb+mf', not a MIG profile"},
      {"3:1g.5gb", "GPU 3 does not exist (there are 3 GPUs)"},
      {"0:3g.20", "'0:3g.20' has '3g.20', not a MIG profile like 3g.20gb"},
      {"0:8g.5gb", "has '8g.5gb', not a MIG profile"},
      {"x:1g.5gb", "'x:1g.5gb' does not start with a GPU index and ':'"},
      {"0:1g.5gb;0:1g.5gb", "lists GPU 0 again"},
  };
  for (const auto& [layout, why] : bad) {
    SCOPED_TRACE(layout);
    setenv("AEGIS_EMULATED_MIG", layout, 1);
    std::string error;
    EXPECT_FALSE(open_nvml(kLibrary, &error));
    EXPECT_NE(error.find("failed to initialise: emulated driver: AEGIS_EMULATED_MIG"), std::string::npos) << error;
    EXPECT_NE(error.find(why), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
}

}  // namespace
