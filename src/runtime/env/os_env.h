// The real environment of aegisd: the system clock, NVML (or the emulated GPUs), job
// attempts as aegis-shim processes with their files in the state directory
// (runtime/launch), tracked by cgroup or as the shim's descendants, signalled through
// pidfds; users and groups from the system's databases.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "runtime/env/env.h"
#include "runtime/launch/job_processes.h"

namespace aegis {

struct OsEnvOptions {
  std::string state_dir;
  std::string shim;              // path of aegis-shim
  std::string job_tracking = "auto";  // auto | cgroup | descendants
  double kill_grace_s = 10;      // SIGTERM to SIGKILL when aegisd stops a job itself
};

class OsEnv : public Env {
 public:
  // Sets up job tracking (a cgroup directory of its own, or descendants). Throws
  // ConfigError when `job_tracking = cgroup` and cgroups cannot be used.
  OsEnv(OsEnvOptions options, std::unique_ptr<GpuSource> gpus);
  ~OsEnv() override;  // removes its (empty) cgroup directory

  Seconds now() override;
  std::vector<GpuStatus> sample_gpus(const SampleRequest& what) override;
  std::string describe_gpus() const override;
  bool is_infrastructure(pid_t pid) override;
  std::map<pid_t, AttemptKey> owners(const std::vector<pid_t>& pids, const std::vector<AttemptKey>& running) override;
  void prepare_attempt(JobId job, int attempt, const LaunchFile& launch) override;
  void start_attempt(JobId job, int attempt) override;
  AttemptStatus attempt_status(JobId job, int attempt) override;
  bool stop_attempt(JobId job, int attempt) override;
  void kill_attempt(JobId job, int attempt) override;
  std::vector<JobId> jobs_on_disk(JobId from) override;
  std::vector<int> attempts_on_disk(JobId job) override;
  std::optional<LaunchFile> launch_of(JobId job, int attempt) override;
  void signal_attempt(JobId job, int attempt, int signal) override;
  void prepare_checkpoint_dir(const std::string& dir, uid_t uid, gid_t gid) override;
  std::optional<Seconds> checkpointed_at(const std::string& dir) override;
  std::string log_tail(JobId job, int attempt, bool stderr_stream, std::size_t max_bytes) override;
  LogChunk read_log(JobId job, int attempt, bool stderr_stream, std::uint64_t offset, std::uint64_t max_bytes) override;
  std::string tracking() const override;
  std::optional<std::uint64_t> process_start_ticks(pid_t pid) override;
  std::optional<std::string> user_name(uid_t uid) override;
  std::optional<std::int64_t> id_of(std::string_view name, bool group) override;
  bool in_group(uid_t uid, gid_t gid, const std::string& group) override;
  bool is_directory_for(const std::string& path, uid_t uid, gid_t gid) override;
  std::vector<std::pair<std::string, std::string>> passed_on() override;

  // Where a new attempt's cgroup goes ("" without cgroups), for its launch file.
  const std::string& cgroup_mount() const { return cgroup_mount_; }
  std::string cgroup_for(JobId job, int attempt) const;

 private:
  std::optional<JobProcesses> processes_of(JobId job, int attempt, uid_t uid) const;

  OsEnvOptions opt_;
  std::unique_ptr<GpuSource> gpus_;
  std::string cgroup_mount_, cgroup_base_;       // empty base: track descendants of each shim
  std::string no_cgroup_why_;                    // why there is no cgroup base, for tracking()
  std::map<AttemptKey, int> shim_pidfds_;        // shims started here (pidfds never name another process)
  std::map<AttemptKey, Seconds> kill_at_;        // stopped by us after their shim was gone
  std::map<AttemptKey, uid_t> uid_of_;           // for the session fallback
};

}  // namespace aegis
