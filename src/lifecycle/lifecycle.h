// Every job's life, the same in the simulator and in aegisd: the state machine with named
// transitions, the two queues and their order, strict head-of-line, the recovery
// bookkeeping, "can this job ever run here", and what each launch gets (its MPS memory
// limit). Pure: it reads no clock and touches no OS. Drivers feed it events (submitted,
// started or not, first activity, ended with a typed outcome, cancel requested) and apply
// the effects it returns; it asks the engine through the driver's Placer.
//
//   submitted ──► Queued(main) ──place──► Running ──ended(completed)──► Completed
//                    ▲   │                  │  ├──ended(oom|failed)──► (recovery rule) ─► Queued(recovery) | Failed
//      never started │   └─never runs─► Failed │  ├──ended(lost: never started)──► Queued (its old place)
//   or restartable ──┘                         │  ├──ended(unknown)──► Failed | Queued (restartable)
//                    cancel: Queued ─► Cancelled;  Running ─► (signal) ─► ended(cancelled) ─► Cancelled
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/job_state.h"
#include "core/small_list.h"
#include "lifecycle/activity_anchor.h"
#include "lifecycle/holds.h"
#include "lifecycle/fair_share.h"
#include "lifecycle/id_table.h"
#include "lifecycle/memory_ledger.h"
#include "lifecycle/placer.h"
#include "lifecycle/seq_queue.h"
#include "lifecycle/time_limits.h"
#include "sched/config.h"

namespace aegis {

// One attempt of a job, as far as scheduling goes (drivers keep their own details).
struct LifeAttempt {
  int number = 0;  // 1, 2, ...
  Placement placement;
  Seconds launched_at = 0;
  std::optional<Seconds> first_activity;
  Anchor anchor = Anchor::None;        // what first_activity was told from
  std::optional<Seconds> context_at;   // its first process seen on a GPU (CUDA context)
  AnchorWatch watch;                   // the search for first_activity (observe())
  std::optional<Seconds> ended_at;
  AttemptOutcome outcome = AttemptOutcome::Running;
  std::string detail;
  std::optional<Seconds> checkpointed_at;  // the last checkpoint it told of (preemption.h)
};

// What a driver read of the running jobs' GPUs at one instant (observe()).
struct ActivityReadings {
  std::map<int, std::optional<double>> gpu_activity;       // engine GPU index -> activity, if the driver has it
  std::map<JobId, std::vector<JobGpuReading>> jobs;        // each job on the GPUs where its processes show
  std::map<int, MiB> gpu_free_mib;                         // each GPU's free memory, when the driver has it
};

enum class QueueName { None, Main, Recovery };

struct LifeJob {
  QueuedJob queued;  // its spec (estimates and hints included) and recovery state, as the engine takes them
  JobState state = JobState::Queued;
  QueueName queue = QueueName::Main;
  std::int64_t queue_seq = 0;      // order within its queue
  QueueName placed_from = QueueName::None;  // the queue its current attempt was placed from
  bool cancel_requested = false;
  bool restartable = false;        // may run again when an attempt's outcome is unknown
  bool timed_out = false;          // its attempt passed its time limit and was signalled (issue 32 item 5)
  std::string reason;              // why it waits, failed or was cancelled
  std::string blamed;              // blamed for a neighbour's OOM (lifecycle_blame.cpp), this attempt
  std::optional<Seconds> started_at, ended_at;
  // Preemption (issue 32 item 1, lifecycle/preemption.h): stopped so that `preempted_for`
  // can start; warned at `preempt_warned_at`, stopped when it says it is ready or at
  // `preempt_stop_at`; `preempt_stopping` once the stop was asked for.
  std::optional<JobId> preempted_for;
  Seconds preempt_warned_at = 0, preempt_stop_at = 0;
  bool preempt_stopping = false;
  // Inline the first: most jobs run once, and the simulator forgets a job when it ends.
  SmallList<LifeAttempt, 1> attempts;

  const JobSpec& spec() const { return queued.spec; }
  JobId id() const { return queued.spec.id; }
  LifeAttempt* current() { return attempts.empty() ? nullptr : &attempts.back(); }
  const LifeAttempt* current() const { return attempts.empty() ? nullptr : &attempts.back(); }
  // Holds GPUs now: running, and its current attempt not ended.
  bool holds_gpus() const { return state == JobState::Running && current() && !current()->ended_at; }
};

// The start of a Lost attempt's detail when the host failed it after it started (the driver
// saw its GPU's MPS control daemon down while it ran): requeued like any Lost attempt, but
// not counted towards max_unstarted_attempts. Persisted with the detail, so it survives a
// restart of the driver; users never write details.
inline constexpr std::string_view kInterruptedByHost = "interrupted by the host: ";

// How an attempt ended, as the driver saw it.
struct Ended {
  AttemptOutcome outcome = AttemptOutcome::Completed;  // not Running
  std::string detail;                                  // the log line, the errno, ...
};

// The detail of a launch started ahead of a waiting head, within its reserved start (item 5).
inline constexpr std::string_view kBackfilledLaunch = "backfilled: ahead of the waiting head, within its reserved start";

// What the driver must do, in this order: persist each change (with its event), start
// each launch, signal each job to stop.
struct Effects {
  struct Start {
    JobId job = 0;
    Placement placement;
    int attempt = 0;
    std::optional<MiB> mps_limit_mib;  // the MPS client memory limit, when MPS limits apply
    bool resume = false;  // an earlier attempt ran: it should resume from its checkpoint (AEGIS_RESUME)
    bool backfilled = false;  // started ahead of a waiting head, within its reservation (item 5)
  };
  // A running job warned that it is about to be preempted (its checkpoint signal).
  struct Warn {
    JobId job = 0;
    int attempt = 0;
    int signal = 0;
  };
  struct Change {
    JobId job = 0;
    std::string event;   // "submit", "launch", "requeue", "failed", "completed", ...
    std::string detail;
  };
  std::vector<Change> changes;
  std::vector<Start> starts;
  std::vector<JobId> signals;  // running jobs to stop (cancel, preemption)
  std::vector<Warn> warnings;  // running jobs to warn of their preemption (before `signals`)
  std::vector<JobId> finished;  // jobs that reached a final state (reported with or without changes)
  std::optional<Blocked> blocked;   // why the head of the queue waits (after schedule)
  std::optional<Seconds> wake_at;   // ask again then, even if nothing happens
  std::optional<Seconds> reserved_start;  // backfill (item 5): the waiting head's reservation
  // Backfill (item 5, backfill_join_slowdown): a server where a join declined now becomes
  // allowed at a later time with nothing happening (the joined job's slowed end comes by the
  // reservation as now advances): ask again there then. Each server once, at its earliest.
  std::vector<std::pair<int, Seconds>> join_turns;

  void merge(Effects&& o);
  // As a fresh one, keeping the lists' storage (the calls that fill an Effects the driver
  // keeps). A new field must be reset here too.
  void reset();
};

struct LifecycleOptions {
  // Report every change (the daemon persists them); a simulator, which keeps no store,
  // turns it off and saves the strings.
  bool report_changes = true;
  // Copy each start's placement into Effects::Start (the daemon launches from it; the
  // simulator, told through its Placer, turns it off).
  bool start_placements = true;
  // MPS with per-client memory limits: a job gets one from what is known of it
  // (lifecycle/mps_limit.h), unless placed exclusive (no job may join it).
  bool mps_limits = false;
  // An attempt whose shim ended before starting the job goes back to its place; this many
  // in a row end the job (something is wrong with the host, not the job).
  int max_unstarted_attempts = 3;
  // Fair share (issue 32 item 2, lifecycle/fair_share.h): the config's weights with the
  // driver's ids. Used only when the config sets weights or caps (else FIFO, as published).
  ShareWeights share_weights;
  // Keep every user's charged GPU share even without weights (the simulator's per-user
  // report of a trace with users).
  bool track_usage = false;
  // Preemption (issue 32 item 1, lifecycle/preemption.h): a waiting head of a higher
  // priority level may stop lower-level running jobs. Off unless the driver's config turns it on.
  bool preemption = false;
  // A job blamed for a neighbour's OOM (it grew past its declared memory plus the margin:
  // lifecycle_blame.cpp) is stopped and its end charged to its own ladder; off, it is
  // charged (its history, its OOM count) and runs on. aegisd's `oom_blame_stop`.
  bool oom_blame_stop = true;
};

class Lifecycle {
 public:
  Lifecycle(const EngineConfig& config, LifecycleOptions options);
  // Movable, not copyable: the queues point at the jobs (a move keeps them in place).
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;
  Lifecycle(Lifecycle&&) = default;
  Lifecycle& operator=(Lifecycle&&) = default;

  // --- events -------------------------------------------------------------------------
  // A new job, at the back of the main queue. Its spec carries the estimates the driver
  // could give it (the estimate chain is the driver's: it knows the sources).
  Effects submitted(JobSpec spec, bool exclusive, bool restartable, Seconds t);
  // [issue 32 items 3-4] The same with its dependencies and its array's cap (lifecycle/holds.h).
  Effects submitted(JobSpec spec, bool exclusive, bool restartable, Seconds t, const JobLinks& links);
  // A job as a driver persisted it (after a restart): queued, or running its last attempt.
  void restore(LifeJob job);
  void restore(LifeJob job, const JobLinks& links);  // [issue 32] with its links
  // [issue 32] The final state of a job the lifecycle no longer holds (forgotten, or ended
  // before a restart) that a restored job depends on or whose array it is in.
  void known_final(JobId id, JobState s) { holds_.finished(id, s); }
  // [issue 32] The same of an array's element, which joins its array (its probe may have ended).
  void known_element(JobId id, JobId array_id, int index, JobState s) { holds_.ended_element(id, array_id, index, s); }
  // [issue 32] The memory a running job's processes use now, per GPU at most (the simulator;
  // aegisd's readings come through observe()): an array's probe is learned from it. Returns
  // when its array's elements will be released if it grows no more (Holds::peak_due): a
  // driver that does not pass on a clock asks again then (aegisd passes every tick).
  std::optional<Seconds> memory_seen(JobId id, MiB mib, Seconds t);
  // [issue 32] Links will come: remember how every job ends from now on (holds.h activate()).
  void expect_links() { holds_.activate(); }
  // [issue 32] Its dependencies as expanded at submit (an array's id: its elements).
  std::vector<After> after_of(JobId id) const { return holds_.after_of(id); }
  int array_limit_of(JobId array) const { return holds_.array_limit_of(array); }
  // The driver could not start an attempt the lifecycle placed (no process exists): a
  // transient failure (full disk, no descriptors) puts it back in its place, another ends it.
  Effects start_failed(JobId id, bool transient, const std::string& why, Seconds t);
  // The driver could not even prepare a launch the lifecycle placed (its files: a full
  // disk): the launch never happened. The job is back in its old place, without the attempt.
  Effects withdraw(JobId id, const std::string& why);
  // The job's estimates changed (a peak was recorded for its signature while it waited).
  void set_estimates(JobId id, const MemoryEstimates& e);
  void set_hints(JobId id, const ProfileHints& h);  // its utilisation from history, likewise
  void set_predicted_util(JobId id, std::optional<double> u);  // the lpa order's prediction, likewise
  void set_predicted_duration(JobId id, std::optional<Seconds> s);  // backfill's (item 5), likewise
  // The job's first GPU activity, at `t`: its observation window starts. The simulator
  // knows the time (Reported); aegisd's readings go through observe(), which calls this.
  Effects first_activity(JobId id, Seconds t, Anchor anchor = Anchor::Reported);
  // The running jobs' GPUs as a driver read them: each job not yet active is searched for
  // its first activity (activity_anchor.h), which starts its window. Only jobs holding
  // GPUs count; a job's readings on GPUs it does not hold are ignored.
  Effects observe(const ActivityReadings& readings, Seconds t);
  // Its current attempt ended. Oom and Failed wait for the recovery rule (schedule());
  // Lost (never started, or interrupted by the host: kInterruptedByHost) requeues it in its
  // old place, its recovery state untouched; Unknown ends it unless restartable.
  Effects ended(JobId id, const Ended& e, Seconds t);
  // The same into `fx` (reset first), reusing its storage: a driver that ends jobs by the
  // hundred thousand (the simulator) keeps one.
  void ended(JobId id, const Ended& e, Seconds t, Effects& fx);
  // A cancel: a queued job ends now; a running one is signalled and ends when it stops.
  Effects cancel(JobId id, const std::string& why, Seconds t);
  // Time limits (issue 32 item 5, lifecycle/time_limits.h): each attempt past its job's
  // limit at `t` is signalled; it ends failed, "timeout: ...", whatever its exit says
  // (unless it completed first). wake_at: the next deadline. Drivers call it at their ticks.
  Effects expire(Seconds t);
  std::optional<Seconds> next_deadline() const { return deadlines_.next(); }
  // The job's current attempt saved a checkpoint at `t` (preemption.h): a job being
  // preempted that was warned before `t` is stopped now; otherwise it counts for the
  // choice of victims (the work it would lose).
  Effects checkpointed(JobId id, Seconds t);

  // --- decisions ----------------------------------------------------------------------
  // Failures through the recovery rule, then the queues head first (recovery, then main;
  // with several priority levels, level by level, highest first, each level's recovery
  // queue before its main queue): each job is started where the placer says, stopped when
  // it can never run, or left waiting; with strict head-of-line nothing behind a waiting
  // job is tried.
  Effects schedule(Seconds now, Placer& placer);
  // The same into `fx` (reset first), reusing its storage.
  void schedule(Seconds now, Placer& placer, Effects& fx);
  // Whether schedule() has anything to look at.
  bool has_work() const { return !pending_failures_.empty() || !main_.empty() || !recovery_.empty(); }
  std::size_t queued_count() const { return main_.size() + recovery_.size(); }

  // --- views --------------------------------------------------------------------------
  const LifeJob* find(JobId id) const;
  // Jobs holding GPUs now, as the engine sees them (RunningJob::gpus: indices of the
  // part on `server`).
  std::vector<RunningJob> running_on(int server) const;
  // Queued jobs in the order they will be served (by priority level, higher first; within
  // a level the recovery queue first; in each, fair share at the last pass's time, then FIFO).
  std::vector<JobId> queue_order() const;
  // What each user used (charged, decayed, factor) and the caps (lifecycle/fair_share.h).
  const FairShare& fair_share() const { return share_; }
  // Each user's fair-share factor as a pass at `now` orders by it: with
  // fair_share_committed, what the running jobs are expected to add counts as used.
  std::map<std::int64_t, double> fair_share_factors(Seconds now) const;
  // Usage again from the attempts that ended before this lifecycle began (aegisd's store,
  // at a restart) and the running jobs restored: replayed in time order, so each user's
  // usage is what it was (FairShare::rebuild). Nothing when fair share is off.
  void rebuild_usage(std::vector<PastHold> ended);
  Seconds last_pass() const { return last_pass_; }
  std::vector<JobId> holding_gpus() const;
  // Drops a finished job (the daemon keeps finished jobs in its store only).
  void forget(JobId id);
  const EngineConfig& config() const { return config_; }
  // Jobs preempted so far (each stop of a running job for a higher level), for reports.
  std::int64_t preemptions() const { return preemptions_; }
  // The job that preemption holds the freed GPUs for, if any.
  std::optional<JobId> preemptor() const { return preemptor_; }

 private:
  LifeJob& job(JobId id);
  // Strings are made only when changes are reported (a simulator makes none; the test is
  // here, inline, so that it costs such a driver no call).
  void change(Effects& fx, JobId id, std::string_view event, std::string_view detail) const {
    if (opt_.report_changes) record_change(fx, id, event, detail);
  }
  void record_change(Effects& fx, JobId id, std::string_view event, std::string_view detail) const;
  void enqueue(LifeJob& j, QueueName q, bool new_place);
  void dequeue(LifeJob& j);
  void finish(LifeJob& j, JobState s, std::string_view reason, Seconds t, Effects& fx, std::string_view event);
  RunningJob running_view(const LifeJob& j, const Placement::Part& part) const;
  // [issue 32] lifecycle_holds.cpp: jobs whose dependency can no longer be met are cancelled;
  // whether a queued job is held (it keeps its place and blocks nothing behind it).
  void cancel_doomed(Seconds now, Effects& fx);
  bool held(LifeJob& j, Seconds now, Effects& fx);
  Holds::Lookup lookup();
  // Fair share's hooks (issue 32 item 2): the order a queue is served in when it is not
  // FIFO, and a job's charge from its start to its end.
  bool reorders() const { return share_.orders() || ranked_ > 0; }
  // `fresh`: count what running jobs are committed to anew (else the pass's so far).
  void serving_order(const SeqQueue<LifeJob>& q, Seconds now, std::vector<LifeJob*>& out, bool fresh = true) const;
  // out[first..] by level, then factor (pass_committed_ counted), then their order there.
  void sort_by_share(Seconds now, std::vector<LifeJob*>& out, std::size_t first) const;
  // [fair share] What the running jobs are expected to add per user (fair_share_committed),
  // and one job's part of it.
  std::map<std::int64_t, double> committed_usage(Seconds now) const;
  double committed_of(const LifeJob& j, Seconds now) const;
  // [issue 32 item 1] Levels dominate queues: each level is a round of the pass, its
  // recovery queue then its main queue (none or one level: the queues as published).
  void queued_levels(std::vector<int>& out) const;
  std::vector<int> levels_;  // schedule()'s, kept for its storage
  void charge_stop(const LifeJob& j, Seconds t);
  // Backfill (lifecycle/backfill.h): the waiting head's reserved start, if one is known.
  std::optional<Seconds> reservation(const LifeJob& head, Seconds now, const Placer& placer);
  void hold(const Placement& p, Seconds until);
  bool keeps_reservation(const LifeJob& j, const Placement& p, Seconds now, Seconds reserved);
  std::vector<HeldGpu> bf_held_;      // the pass's reservation: what runs, until when
  std::optional<HeadNeed> bf_need_;   // what the head asks of a GPU (nothing: idle GPUs)
  int bf_num_gpus_ = 0;
  ReservationBook bf_book_;           // reserved_start of bf_held_, asked again per candidate
  BusyGpus bf_busy_;                  // GPUs running jobs hold, until when (backfill_joins)
  // `turns_at`: where it joins only jobs whose slowed end is past the reservation, when that
  // stops being so (the latest over its GPUs); left alone otherwise.
  bool joins_running(const Placement& p, Seconds until, Seconds now, Seconds reserved,
                     std::optional<Seconds>* turns_at = nullptr) const;
  std::vector<std::pair<int, Seconds>> bf_turns_;  // this pass's join_turns, before the reduction
  // `backfilled`: ahead of a waiting head, within its reservation (the start and its launch event say so).
  void start(LifeJob& j, Placement&& p, Seconds now, Placer& placer, Effects& fx, bool backfilled = false);
  // Preemption (preemption.cpp). Each returns true when the pass must stop here: the
  // preemptor waits for its victims, which nothing else may take the place of.
  bool preempt_for(LifeJob& head, Seconds now, Placer& placer, Effects& fx);
  bool serve_preemptor(Seconds now, Placer& placer, Effects& fx);
  void advance_preemptions(Seconds now, Effects& fx);
  void stop_victim(LifeJob& v, Seconds now, Effects& fx, std::string_view why);
  // A job being preempted ended: back to its place (true), or not preempted after all.
  bool requeue_if_preempted(LifeJob& j, const Ended& e, Seconds t, Effects& fx);
  // An OOM of `victim` at `t` on a GPU shared with a job that grew past what its user
  // declared: the victim is requeued without penalty, the grower charged (lifecycle_blame.cpp).
  bool blame_neighbour(LifeJob& victim, Seconds t, Effects& fx);
  std::optional<MiB> free_at(const LifeJob& j, Seconds t) const;  // its GPUs' free memory at t (the smallest)

  EngineConfig config_;
  LifecycleOptions opt_;
  IdTable<LifeJob> jobs_;  // by id; an entry stays put from submit to forget (id_table.h)
  // Queue position -> job, per queue, in the order jobs are served in (seq_queue.h: an
  // array, not a tree of nodes). The job itself, not its id: a pass reads every queued
  // job, and jobs_'s nodes do not move.
  SeqQueue<LifeJob> main_, recovery_;
  std::int64_t next_seq_ = 1;
  std::vector<std::pair<JobId, Failure>> pending_failures_;  // ended Oom/Failed, for the recovery rule
  std::vector<std::pair<JobId, Failure>> failures_;          // schedule()'s, kept for its storage
  Holds holds_;  // [issue 32] dependencies and arrays; inactive (asked nothing) while no job has any
  FairShare share_;
  bool share_on_ = false;          // charge starts and ends (weights, caps or track_usage)
  std::int64_t ranked_ = 0;        // queued jobs with a priority level other than 0
  Seconds last_pass_ = 0;
  std::vector<LifeJob*> served_;   // schedule()'s serving order when not FIFO, kept for its storage
  // serving_order()'s committed_usage, which each start in the pass adds to (schedule()).
  mutable std::map<std::int64_t, double> pass_committed_;
  Deadlines deadlines_;  // attempts' time limits (issue 32 item 5)
  std::optional<JobId> preemptor_;  // the head that running jobs are being stopped for
  std::int64_t preemptions_ = 0;
  MemoryLedger ledger_;                                      // the GPUs' last samples (observe)
  std::unordered_map<JobId, MiB> free_at_failure_;           // a pending OOM's GPU free memory then
};

}  // namespace aegis
