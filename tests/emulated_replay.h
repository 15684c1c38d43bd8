// aegisd on emulated GPUs, second by second: the test writes each second's state into the
// emulated GPU's table (memory, activity, processes), and the daemon reads it through the
// real NVML loader (open_nvml on the emulated library) and its real anchoring path. The
// clock, attempts and process owners are tests/fake_env.h's.
#pragma once
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/daemon/daemon.h"
#include "runtime/gpu/emulated/state.h"
#include "sched/policies.h"
#include "tests/fake_env.h"
#include "tests/test_util.h"

namespace aegis::test {

class ReplayEnv : public FakeEnv {
 public:
  std::unique_ptr<GpuSource> nvml;
  std::set<pid_t> infrastructure;  // pids that are NVIDIA's MPS server
  // A GPM metric is the mean since the previous read: read once to close the last
  // interval, then again 2 ms later, so that the metrics are those of the state just
  // written (the recorded second), whatever the daemon did in between.
  // The daemon's request (which GPUs' per-process samples it needs) goes to the library as
  // it would from aegisd's sampling thread; recorded like FakeEnv's.
  std::vector<GpuStatus> sample_gpus(const SampleRequest& what) override {
    requests.push_back(what);
    nvml->sample(what);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return nvml->sample(what);
  }
  bool is_infrastructure(pid_t pid) override { return infrastructure.contains(pid); }
};

// A live process to stand for a job's or a server's pid (the emulated library drops the
// entries of dead ones); killed when the object goes.
class Sleeper {
 public:
  Sleeper() : pid_(fork()) {
    if (pid_ == 0) {
      pause();
      _exit(0);
    }
  }
  ~Sleeper() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// Emulated GPUs of `mib` each in a fresh state file, the environment the library reads at
// nvmlInit, and a daemon on them.
struct EmulatedRig {
  std::string state_path;
  ReplayEnv env;
  DaemonConfig cfg;
  std::unique_ptr<emu::State> state;
  std::unique_ptr<Daemon> d;

  EmulatedRig(const std::string& gpus, bool process_util, bool gpm, const std::string& policy = "aegis",
              const std::string& sharing = "process") {
    static int count = 0;  // a fresh state file and store each
    const std::string n = std::to_string(count++);
    state_path = temp_path("replay.state" + n);
    std::remove(state_path.c_str());
    setenv("AEGIS_EMULATED_STATE", state_path.c_str(), 1);
    setenv("AEGIS_EMULATED_GPUS", gpus.c_str(), 1);
    setenv("AEGIS_EMULATED_PROCESS_UTIL", process_util ? "1" : "0", 1);
    setenv("AEGIS_EMULATED_GPM", gpm ? "1" : "0", 1);
    std::string error;
    env.nvml = open_nvml(AEGIS_EMULATED_NVML, &error);
    if (!env.nvml) ADD_FAILURE() << error;
    state = emu::State::open(state_path, {}, &error);
    if (!state) ADD_FAILURE() << error;
    cfg.daemon.state_dir = temp_path("replay-store" + n);
    mkdir(cfg.daemon.state_dir.c_str(), 0700);
    cfg.daemon.policy = policy;
    cfg.daemon.sharing = sharing;
    cfg.daemon.mps_pipe_dir = "/tmp/fake-mps-pipe";
    cfg.daemon.durability = "normal";
    cfg.engine = policy_config(policy);
    d = std::make_unique<Daemon>(cfg, env);
  }
  ~EmulatedRig() {
    d.reset();
    env.nvml.reset();
    for (const char* v : {"AEGIS_EMULATED_STATE", "AEGIS_EMULATED_GPUS", "AEGIS_EMULATED_PROCESS_UTIL", "AEGIS_EMULATED_GPM"})
      unsetenv(v);
    std::remove(state_path.c_str());
  }
  JobId submit(uid_t uid, const std::string& name, std::optional<MiB> mem = std::nullopt) {
    api::SubmitRequest r;
    r.job.command = {"python3", name + ".py"};
    r.job.workdir = "/tmp";
    r.job.name = name;
    r.job.mem_mib = mem;
    const auto reply = d->respond(r, Caller{uid, uid, 1}).object;
    EXPECT_TRUE(reply["ok"].get<bool>()) << reply.dump();
    return reply.value("id", JobId{0});
  }
  nlohmann::json show(JobId id) { return d->respond(api::ShowRequest{id}, Caller{0, 0, 1}).object["job"]; }
  void tick_at(Seconds t) {
    env.clock = t;
    d->tick(t);
  }
  // `pid` on `device` now holds `mib` and runs at `solo` (replacing what it held and ran).
  void play(std::uint32_t pid, int device, MiB mib, const emu::Activity& solo) {
    state->release(pid);
    ASSERT_TRUE(state->allocate(device, pid, mib));
    ASSERT_TRUE(state->set_activity(device, pid, solo));
  }
};

}  // namespace aegis::test
