// The daemon's brain, free of sockets and event loops: it keeps the jobs (in memory and in
// the store), samples the GPUs, asks the engine what to do, and does it, writing every
// state change before acting on it. server.h drives it from the event loop; tests drive it
// directly.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "runtime/api/request.h"
#include "runtime/daemon/config.h"
#include "runtime/gpu/gpu_source.h"
#include "runtime/job/job.h"
#include "runtime/launch/attempt_dir.h"
#include "runtime/launch/job_processes.h"
#include "runtime/store/store.h"
#include "estimate/learned.h"
#include "sched/engine.h"
#include "telemetry/rolling_window.h"

namespace aegis {

// Who is calling, from the socket's SO_PEERCRED.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

// A reply: a JSON object, or (`more` set) a stream: each call appends the next part of
// the reply's text to `out` and returns false once the whole line has been given.
struct Reply {
  nlohmann::json object;
  std::function<bool(std::string& out)> more;
};

struct DaemonStats {
  std::map<std::string, std::int64_t> outcomes;  // completed, failed, cancelled, oom (attempts)
  std::int64_t submissions = 0;
  std::int64_t ticks = 0;
  double tick_seconds_sum = 0;                   // scheduling passes: engine and actions
  double tick_seconds_max = 0;
  std::vector<double> recent_tick_seconds;       // last 1024, for quantiles
  std::vector<double> recent_decide_seconds;     // snapshot and engine only, last 1024
};

class Daemon {
 public:
  // Opens the store and recovers the jobs it holds (re-adopting attempts that still run).
  Daemon(DaemonConfig config, std::unique_ptr<GpuSource> gpus);
  // Jobs keep running (their shims own them); the daemon's cgroup directory goes if empty.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // One API request and its reply ({"ok": ...}). Never throws for bad requests. Long
  // listings (queue, history) come as a stream of parts, produced as the client reads
  // them, so that no reply holds more than a page of jobs at once.
  Reply respond(const api::Request& request, const Caller& caller);

  // Samples telemetry and notices first GPU activity and ended attempts; then schedules.
  void sample_and_schedule(Seconds now);
  // Schedules with the telemetry it has (after submissions and cancellations).
  void schedule(Seconds now);
  // Signals the jobs cancelled since the last call (the event loop calls it after its
  // group commit, so that a cancel is on disk before any process is signalled).
  void send_cancel_signals(Seconds now);

  // For the event loop: group commit of the requests read in one pass.
  Store& store() { return store_; }
  const DaemonConfig& config() const { return cfg_; }
  const DaemonStats& stats() const { return stats_; }
  // After a failed commit: the database is the truth again. Forgets what memory holds and
  // reloads every unfinished job as at a restart (nothing was acted on before the commit).
  void reload_after_store_error(Seconds now, const std::string& what);
  // The last storage problem (a full disk, a damaged database), "" when all is well.
  const std::string& storage_error() const { return storage_error_; }
  void storage_recovered();
  // How job processes are tracked: "cgroup DIR" or "descendants of each job's shim".
  std::string tracking() const;
  std::string metrics_text() const;  // Prometheus text format
  std::size_t active_jobs() const { return active_.size(); }
  std::size_t running_jobs() const;

 private:
  struct Gpu {
    std::string uuid;
    int nvml_index = 0;
    GpuStatus status;
    RollingWindow window;
    std::vector<GpuSample> window_copy;
  };

  nlohmann::json handle(const api::Request& request, const Caller& caller);  // the ops that are not listings
  // Loads every unfinished job from the store: at start (`restarted`), or after a failed
  // commit, when memory is reset to what the database holds.
  void recover_jobs(Seconds now, bool restarted);
  void select_gpus(const std::vector<GpuStatus>& all);
  void note_activity(Seconds now);
  void collect_exits(Seconds now, std::vector<Failure>& failures);
  void cancel_orphans(Seconds now);
  void finish_attempt(DaemonJob& job, const std::string& outcome, const std::string& detail, Seconds now);
  void end_without_record(DaemonJob& job, bool started, Seconds now);
  std::optional<JobProcesses> processes_of(const DaemonJob& job) const;
  DaemonJob* owner_of_gpu_process(pid_t pid, std::map<std::string, DaemonJob*>& by_cgroup);
  void setup_tracking();
  void note_io_trouble(const std::string& what);
  JobSpec spec_of(const DaemonJob& job) const;
  RunningJob running_view(const DaemonJob& job) const;
  std::vector<GpuView> views() const;
  QueuedJob queued_view(const DaemonJob& job) const;
  void apply(const Decisions& d, Seconds now);
  void launch(DaemonJob& job, const Launch& l, Seconds now);
  void save(const DaemonJob& job, const std::string& event, const std::string& detail, Seconds now);
  void request_cancel(DaemonJob& job, Seconds now, const std::string& why = "");

  nlohmann::json submit(const api::SubmitRequest& r, const Caller& c);
  Reply list(const api::ListRequest& r, const Caller& c);
  Reply history(const api::HistoryRequest& r);
  Reply jobs_from_store(std::int64_t limit, std::optional<uid_t> uid, nlohmann::json tail);
  nlohmann::json show(const api::ShowRequest& r, const Caller& c);
  nlohmann::json cancel(const api::CancelRequest& r, const Caller& c);
  nlohmann::json logs(const api::LogsRequest& r, const Caller& c);
  nlohmann::json gpus_reply() const;
  bool may_manage(const Caller& c, uid_t owner) const;
  std::optional<DaemonJob> find(JobId id);

  DaemonConfig cfg_;
  Store store_;
  std::unique_ptr<GpuSource> source_;
  Engine engine_;
  EngineState engine_state_;
  std::vector<Gpu> gpus_;
  std::map<JobId, DaemonJob> active_;  // queued and running
  std::map<JobId, Seconds> kill_at_;   // cancelled jobs whose shim is gone: SIGKILL then
  std::vector<JobId> cancel_signals_;  // cancelled, recorded, not signalled yet
  std::vector<Failure> pending_failures_;
  DaemonStats stats_;
  std::string gpu_error_;              // why sampling failed last, for `aegis gpus`
  std::map<std::string, MiB> history_; // job signature -> largest recorded peak (per GPU)
  std::optional<LearnedModel> learned_;
  mutable std::map<JobId, std::optional<MiB>> learned_cache_;
  std::string blocked_reason_;
  std::string cgroup_mount_, cgroup_base_;  // empty base: track descendants of each shim
  std::map<JobId, int> shim_pidfds_;        // shims this daemon started (pidfds never name another process)
  Seconds launch_backoff_until_ = 0;        // after a transient launch failure (full disk, no fds)
  std::string storage_error_;
  std::string io_trouble_;                  // last "cannot tell now" while collecting exits
  JobId id_floor_recorded_ = 0;             // the watermark on disk: ids up to it may be in use
};

}  // namespace aegis
