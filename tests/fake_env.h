// A fake OS environment for aegisd's logic (src/runtime/env/env.h): a settable clock and
// GPUs, job attempts whose fate the test decides, users, and a record of every launch and
// stop. The daemon runs on it exactly as on the real one, without a single process.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "runtime/env/env.h"

namespace aegis::test {

class FakeEnv : public Env {
 public:
  Seconds clock = 1000;
  std::vector<GpuStatus> gpus;
  std::map<pid_t, AttemptKey> owner;                      // GPU process -> attempt
  struct Launched {
    LaunchFile launch;
    bool started = false;
  };
  std::map<AttemptKey, Launched> launched;
  std::map<AttemptKey, AttemptStatus> status;             // what attempt_status() answers
  std::map<AttemptKey, std::string> stderr_tail;
  std::vector<AttemptKey> stops;                          // stop_attempt() calls
  std::set<AttemptKey> stop_refused;                      // shims still starting up
  int prepare_failures = 0;                               // the next ones throw (transient)
  std::map<uid_t, std::string> users{{0, "root"}, {1001, "ann"}, {1002, "bob"}};
  std::vector<SampleRequest> requests;                    // sample_gpus() calls, in order

  // The attempt the daemon started for `job` (the last one), if any.
  const Launched* last_launch(JobId job) const {
    const Launched* out = nullptr;
    for (const auto& [key, l] : launched)
      if (key.first == job) out = &l;
    return out;
  }
  std::string env_of(JobId job, const std::string& name) const {
    const Launched* l = last_launch(job);
    if (!l) return "";
    for (const auto& e : l->launch.env)
      if (e.rfind(name + "=", 0) == 0) return e.substr(name.size() + 1);
    return "";
  }
  // The test decides how an attempt ended.
  void end(JobId job, int attempt, int wait_status, const std::string& log = "") {
    AttemptStatus s;
    s.state = AttemptStatus::State::Ended;
    s.started = true;
    s.wait_status = wait_status;
    s.ended_at = clock;
    status[{job, attempt}] = s;
    stderr_tail[{job, attempt}] = log;
  }
  // One GPU process of the attempt on GPU `gpu`, holding `mib` and running kernels (its
  // per-process utilisation sample says so: the window starts now).
  void activity(JobId job, int attempt, int gpu, MiB mib, pid_t pid) {
    process(job, attempt, gpu, mib, pid, 1.0);
  }
  // The same with the sample the driver gives (`util`; none: a driver without per-process
  // samples on that GPU).
  void process(JobId job, int attempt, int gpu, MiB mib, pid_t pid, std::optional<double> util) {
    GpuStatus& g = gpus[static_cast<std::size_t>(gpu)];
    g.process_samples = util.has_value();
    g.processes.push_back({static_cast<std::uint32_t>(pid), mib, util});
    owner[pid] = {job, attempt};
  }

  Seconds now() override { return clock; }
  // As a driver answers the request: per-process samples and energy only where asked.
  std::vector<GpuStatus> sample_gpus(const SampleRequest& what) override {
    requests.push_back(what);
    auto out = gpus;
    for (auto& g : out) {
      if (!what.energy) g.energy_j.reset();
      if (what.process_util_on(g.uuid)) continue;
      g.process_samples = false;
      for (auto& p : g.processes) p.sm_util.reset();
    }
    return out;
  }
  std::string describe_gpus() const override { return "fake GPUs"; }
  bool is_infrastructure(pid_t) override { return false; }
  std::map<pid_t, AttemptKey> owners(const std::vector<pid_t>& pids, const std::vector<AttemptKey>& running) override {
    std::map<pid_t, AttemptKey> out;
    for (pid_t p : pids)
      if (auto it = owner.find(p); it != owner.end())
        for (const auto& r : running)
          if (r == it->second) out[p] = r;
    return out;
  }
  void prepare_attempt(JobId job, int attempt, const LaunchFile& launch) override {
    if (prepare_failures > 0) {
      --prepare_failures;
      throw StartError("jobs/x: No space left on device", true);
    }
    launched[{job, attempt}] = {launch, false};
  }
  void start_attempt(JobId job, int attempt) override {
    launched[{job, attempt}].started = true;
    AttemptStatus s;
    s.state = AttemptStatus::State::Running;
    s.started = true;
    s.pgid = static_cast<pid_t>(10000 + job * 10 + attempt);
    status[{job, attempt}] = s;
  }
  AttemptStatus attempt_status(JobId job, int attempt) override {
    auto it = status.find({job, attempt});
    if (it != status.end()) return it->second;
    AttemptStatus gone;
    gone.state = AttemptStatus::State::Gone;
    return gone;
  }
  bool stop_attempt(JobId job, int attempt) override {
    if (stop_refused.count({job, attempt})) return false;
    stops.push_back({job, attempt});
    return true;
  }
  void kill_attempt(JobId, int) override {}
  // Issue 32 item 1: warnings sent, checkpoint directories made, checkpoints told of.
  std::vector<std::tuple<JobId, int, int>> warned;
  std::map<std::string, std::pair<uid_t, gid_t>> checkpoint_dirs;
  std::map<std::string, Seconds> checkpoint_times;
  void signal_attempt(JobId job, int attempt, int signal) override { warned.emplace_back(job, attempt, signal); }
  void prepare_checkpoint_dir(const std::string& dir, uid_t uid, gid_t gid) override { checkpoint_dirs[dir] = {uid, gid}; }
  std::optional<Seconds> checkpointed_at(const std::string& dir) override {
    auto it = checkpoint_times.find(dir);
    return it == checkpoint_times.end() ? std::nullopt : std::optional<Seconds>(it->second);
  }
  std::string log_tail(JobId job, int attempt, bool stderr_stream, std::size_t) override {
    if (!stderr_stream) return "";
    auto it = stderr_tail.find({job, attempt});
    return it == stderr_tail.end() ? "" : it->second;
  }
  LogChunk read_log(JobId, int, bool, std::uint64_t, std::uint64_t) override { return {}; }
  std::string tracking() const override { return "fake"; }
  std::optional<std::uint64_t> process_start_ticks(pid_t pid) override { return pid > 0 ? std::optional<std::uint64_t>(1) : std::nullopt; }
  std::optional<std::string> user_name(uid_t uid) override {
    auto it = users.find(uid);
    return it == users.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  bool in_group(uid_t, gid_t, const std::string&) override { return false; }
  bool is_directory_for(const std::string&, uid_t, gid_t) override { return true; }
  std::vector<std::pair<std::string, std::string>> passed_on() override { return {}; }
};

// GPUs of the fake environment: `n` whole GPUs of `mib`, idle.
inline std::vector<GpuStatus> fake_gpus(int n, MiB mib) {
  std::vector<GpuStatus> out;
  for (int i = 0; i < n; ++i) {
    GpuStatus s;
    s.index = i;
    s.uuid = "GPU-fake-" + std::to_string(i);
    s.name = "Fake GPU";
    s.total_mib = mib;
    s.free_mib = mib;
    s.smact = s.smocc = s.drama = s.util = 0.0;
    out.push_back(s);
  }
  return out;
}

}  // namespace aegis::test
