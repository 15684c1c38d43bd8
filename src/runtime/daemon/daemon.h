// The daemon's logic, free of sockets and event loops: it turns what happens on the server
// (requests, GPU samples, processes starting and ending, all through an Env) into events
// of the job lifecycle, and applies the lifecycle's effects: every change is written to
// the store before it is acted on. Nothing here decides where or when a job runs: the
// lifecycle and the engine do (src/lifecycle). server.h drives it from the event loop;
// the unit tests drive it with a fake Env.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "estimate/calibrated.h"
#include "estimate/utilisation.h"
#include "estimate/learned.h"
#include "lifecycle/estimate_chain.h"
#include "lifecycle/inputs.h"
#include "lifecycle/lifecycle.h"
#include "runtime/api/request.h"
#include "runtime/daemon/config.h"
#include "runtime/daemon/config_reload.h"
#include "runtime/daemon/gpu_reading.h"
#include "runtime/daemon/mps_supervisor.h"
#include "runtime/daemon/notifier.h"
#include "runtime/daemon/run_activity.h"
#include "runtime/env/env.h"
#include "runtime/job/job.h"
#include "runtime/store/store.h"
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
  std::map<std::string, std::int64_t> outcomes;  // attempts that ended, by outcome name
  std::int64_t submissions = 0;
  std::int64_t ticks = 0;
  double tick_seconds_sum = 0;                   // scheduling passes: engine and actions
  double tick_seconds_max = 0;
  std::vector<double> recent_tick_seconds;       // last 1024, for quantiles
  std::vector<double> recent_decide_seconds;     // snapshot and engine only, last 1024
  std::int64_t lost_records = 0;                 // issue 33 item 6: jobs found at start without their record
  bool wal_lost = false;                         // ... and whether the database's -wal was found lost
};

class Daemon {
 public:
  // Opens the store, checks that this server can give the policy what it needs of jobs,
  // and recovers the jobs the store holds. Throws ConfigError with one line.
  Daemon(DaemonConfig config, Env& env);
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // One API request and its reply ({"ok": ...}). Never throws for bad requests. Long
  // listings (queue, history) come as a stream of parts, produced as the client reads
  // them, so that no reply holds more than a page of jobs at once.
  Reply respond(const api::Request& request, const Caller& caller);

  // Reads the GPUs (and, when `sample`, adds their activity to the telemetry windows),
  // notices first GPU activity, ended attempts and gone clients, then schedules. Tests and
  // replays call it; a replay may call it between samples too.
  void tick(Seconds now, bool sample = true);
  // The same with a sample taken elsewhere (aegisd's sampling thread, gpu_sampler.h):
  // `fresh` is the sample completed since the last tick, or null when none has (the last
  // one is still being taken): then nothing new is observed, and ends, orphans and the
  // queue are handled with what is known, so the tick never waits on the driver.
  void tick_with(Seconds now, const GpuReading* fresh);
  // What the next sample must read (gpu_source.h): per-process utilisation only on GPUs
  // where a running job still awaits its first activity, which is all it is used for;
  // never the energy counter, which aegisd does not report.
  SampleRequest sample_request() const;
  // Schedules with what it knows (after submissions and cancellations).
  void schedule(Seconds now);
  // Stops the jobs cancelled since the last call: the event loop calls it after its group
  // commit, so that a cancel is on disk before any process is signalled. The notices of
  // changes made inside that commit are queued for delivery then too.
  void send_stop_signals();
  void send_warnings();  // issue 32 item 1: preemption warnings, once committed

  // After a failed commit: the database is the truth again. Forgets what memory holds and
  // reloads every unfinished job as at a restart (nothing was acted on before the commit).
  void reload_after_store_error(Seconds now, const std::string& what);
  const std::string& storage_error() const { return storage_error_; }
  void storage_recovered();

  Store& store() { return store_; }
  const DaemonConfig& config() const { return cfg_; }
  // A reload (config_reload.h): the live settings of `s` replace the running ones.
  void set_live_settings(const DaemonSettings& s) { copy_live_settings(s, cfg_.daemon); }
  const DaemonStats& stats() const { return stats_; }
  std::string metrics_text() const;  // Prometheus text format
  // GPU memory of each running job's processes per GPU UUID, at the last sample.
  const std::map<JobId, std::map<std::string, MiB>>& job_memory() const { return job_memory_now_; }
  std::size_t active_jobs() const { return records_.size(); }
  std::size_t running_jobs() const;
  std::vector<std::string> gpu_uuids() const;  // the GPUs it schedules (one MPS control daemon each)
  // Watches the managed MPS control daemons from now on (once they run: mps_supervisor.h).
  void supervise_mps();
  std::string tracking() const { return env_.tracking(); }
  Env& env() { return env_; }  // for the sampling thread (gpu_sampler.h)
  std::string describe_gpus() const { return env_.describe_gpus(); }
  // Issue 32 item 6: the notifications' delivery (notifier.h; counts for metrics and tests).
  const Notifier& notifier() const { return *notifier_; }
  Notifier& notifier() { return *notifier_; }
  // The ETA-slip event's seam (item 5 computes the ETAs, `aegis queue --eta`): each waiting
  // job's expected start (wall clock), as computed now. A job that asked for `eta` and whose
  // ETA slipped by more than notify_eta_slip_s since the one last told is notified; jobs no
  // longer waiting are forgotten. Returns the jobs notified.
  std::vector<JobId> note_etas(const std::map<JobId, Seconds>& etas, Seconds now);
  // The estimates aegisd can give a job (for the policy check and `aegis config`).
  static JobInputs provided_inputs(const DaemonConfig& c);
  static LifecycleOptions lifecycle_options(const DaemonConfig& c, Env& env);
  static DaemonConfig with_sharing(DaemonConfig c);

 private:
  struct Gpu {
    std::string uuid;
    int nvml_index = 0;
    GpuStatus status;
    RollingWindow window;
    std::vector<GpuSample> window_copy;
    std::vector<GpuProcess> foreign;  // processes of no job (nor MPS's server) at the last sample
    // The driver gives per-process utilisation here, as the last sample that asked found
    // (`aegis gpus`; asked at start, then only where a job awaits its anchor).
    bool process_samples = false;
    // Memory in use (total - free) less foreign processes' at the last sample that found
    // no job of aegis on it: the driver's own, MPS's server (DeviceInfo::held_mib).
    std::optional<MiB> held_idle_mib;
    // Gone from the driver's list, or switched to MIG mode under aegisd: nothing is placed
    // on it and no job is thought able to run on it (until it comes back as it was).
    std::string unusable;
  };

  // Events in.
  void recover_jobs(Seconds now, bool restarted);
  void select_gpus(const std::vector<GpuStatus>& all);
  void use_sample(const GpuReading& r, bool to_windows);
  void after_sample(Seconds now, bool observe);
  void note_usable(const std::vector<GpuStatus>& all);  // marks GPUs a sample lost (Gpu::unusable)
  void note_activity(Seconds now);
  void collect_ends(Seconds now);
  void cancel_orphans(Seconds now);
  void check_mps(Seconds now, bool force);  // the supervisor's check, its happenings logged
  // Issue 33 item 6 (lost_records.cpp): at start, jobs whose attempts on disk are newer
  // than their record, or that have no record at all (lost with the -wal), are stopped and
  // recorded as lost; stopped attempts are watched until their processes are gone.
  void account_for_lost_records(Seconds now);
  bool newer_attempts_on_disk(DaemonJob& rec, Seconds now);
  void watch_lost_attempts();
  JobId first_unknown_id_ = 0;  // the store's next id before the floor on disk raised it
  std::vector<std::pair<JobId, int>> lost_stopping_;
  // Effects out.
  void apply(Effects fx, Seconds now);
  LaunchFile launch_file(const DaemonJob& rec, const Effects::Start& s) const;
  void note_io_trouble(const std::string& what);
  void persist(const Effects& fx, Seconds now);
  // Views.
  JobSpec spec_of(const DaemonJob& j) const;
  // Issue 32 item 1: a job's checkpoint directory, and the checkpoints jobs told of.
  std::string checkpoint_dir_of(JobId id) const;
  void note_checkpoints(Seconds now);
  // Issue 32 items 5-6: every notify_eta_check_s, while a waiting job asked for `eta` and a
  // delivery is set, the queue's expected starts (lifecycle/eta.h) through note_etas.
  void watch_etas(Seconds now);
  Seconds next_eta_check_ = 0;
  void refresh_estimates(const std::string& signature);
  void record_duration(const std::string& signature, Seconds seconds);  // issue 32 item 5
  LifeJob life_of(const DaemonJob& j) const;
  void sync(DaemonJob& rec);
  std::vector<GpuView> views() const;
  std::vector<DeviceInfo> devices() const;
  OneServerPlacer placer() const;
  nlohmann::json gpus_reply() const;
  bool may_manage(const Caller& c, uid_t owner) const;
  std::optional<DaemonJob> find(JobId id);

  // The API.
  nlohmann::json handle(const api::Request& request, const Caller& caller);
  nlohmann::json submit(const api::SubmitRequest& r, const Caller& c);
  Reply list(const api::ListRequest& r, const Caller& c);
  Reply history(const api::HistoryRequest& r);
  Reply jobs_from_store(std::int64_t limit, std::optional<uid_t> uid, std::vector<std::string> fields);
  nlohmann::json show(const api::ShowRequest& r, const Caller& c);
  nlohmann::json cancel(const api::CancelRequest& r, const Caller& c);
  nlohmann::json logs(const api::LogsRequest& r, const Caller& c);
  // Issue 32 items 3-4 (daemon_links.cpp): a submission's dependencies checked (each job
  // there and the caller's), a restored job's links, the final states of the jobs they
  // name that are no longer held, and `wait`'s answer.
  std::optional<std::string> check_after(const api::JobRequest& req, const Caller& c, std::vector<After>& out);
  JobLinks links_of(const DaemonJob& j) const;
  void restore_finals();
  nlohmann::json wait_reply(const api::WaitRequest& r);

  DaemonConfig cfg_;
  Env& env_;
  Store store_;
  Engine engine_;
  Lifecycle life_;
  std::vector<Gpu> gpus_;
  std::map<JobId, DaemonJob> records_;  // queued and running: what the store holds of them
  std::vector<Effects::Warn> warnings_;  // preemption warnings, recorded, not signalled yet
  std::vector<JobId> stop_signals_;     // cancelled, recorded, not signalled yet
  DaemonStats stats_;
  std::string gpu_error_;               // why sampling failed last, for `aegis gpus`
  std::optional<MpsSupervisor> mps_;    // managed MPS control daemons, once started
  // Memory of each running job's processes per GPU at the last sample (per-job metrics).
  std::map<JobId, std::map<std::string, MiB>> job_memory_now_;
  // The estimate chain (lifecycle/estimate_chain.h): the daemon loads its models and the
  // stored history into it, and tells it each completed run.
  EstimateChain chain_;
  std::map<JobId, RunActivityTotals> activity_;  // each running job's activity samples, for its history
  std::vector<std::string> server_models() const;  // the product names of the scheduled GPUs, once each
  ChainJob chain_job(const DaemonJob& j) const;    // what the chain is told of a job
  // A job's GPU utilisation and sharing score, each with where it came from: "hint",
  // "history", "model-spec" (calibrated_model's prediction), or none (docs/estimators.md).
  struct UtilisationEstimate {
    std::optional<double> gpu_util;
    const char* gpu_util_source = nullptr;
    std::optional<int> sharing_score;
    const char* sharing_score_source = nullptr;
  };
  UtilisationEstimate utilisation_of(const DaemonJob& j) const;
  // The lpa order's prediction (JobSpec::predicted_util): history, else "model-spec", never
  // the user's hint (docs/estimators.md, "In aegisd: the lpa order").
  struct PredictedUtilisation {
    std::optional<double> value;
    const char* source = nullptr;
  };
  PredictedUtilisation predicted_utilisation_of(const DaemonJob& j) const;
  // Sets the job's stored prediction (DaemonJob::predicted_util) from the above, at
  // submission and when a run of its signature ends while it waits; true if it changed.
  bool predict_utilisation(DaemonJob& j) const;
  void record_history(const std::string& signature, const std::vector<std::string>& gpu_uuids, MiB peak,
                      const RunActivity& activity, Seconds now);
  std::string blocked_reason_;
  JobId blocked_job_ = 0;               // the job blocked_reason_ is about (0: none)
  EngineState engine_state_;
  Seconds launch_backoff_until_ = 0;    // after a launch failed for want of disk or descriptors
  std::string storage_error_;
  std::string io_trouble_;              // last "cannot tell now" about an attempt
  JobId id_floor_recorded_ = 0;         // the watermark on disk: ids up to it may be in use
  // Issue 32 item 6: notices go out after their change is committed (persist), delivered
  // off the event loop; the ETA-slip rule's memory.
  std::unique_ptr<Notifier> notifier_;
  EtaSlipWatch eta_watch_;
  std::vector<Notice> pending_notices_;  // changes persisted inside a group commit, not yet committed
  void post_notices();                   // hands pending_notices_ to the notifier
};

}  // namespace aegis
