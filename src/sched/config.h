// Every number of the scheduling engine, in one place, with the published defaults.
// Each field is documented in config.cpp's parameter table (name, meaning, range), which
// also drives `--set name=value`, config files, and the config printed with every run.
#pragma once
#include <string>
#include <vector>

#include "core/units.h"
#include "telemetry/risk.h"

namespace aegis {

struct EngineConfig {
  // --- Stage 1: memory feasibility ---------------------------------------------------
  MiB memory_guard_min_mib = 512;        // subtracted from reported free memory ...
  double memory_guard_fraction = 0.01;   // ... or this fraction of total, whichever is larger
  MiB memory_margin_mib = 2048;          // required on top of an estimate
  MiB estimator_free_floor_mib = 5120;   // required free memory when there is no estimate
  std::string estimator = "none";        // which estimate a job is admitted with
  std::string memory_accounting = "reported";  // reported | booked | both

  // --- Stage 2: post-placement observation -------------------------------------------
  bool observation = true;
  Seconds observation_window_s = 30;     // after the new job's first GPU activity
  Seconds observation_max_wait_s = 300;  // reopen anyway if no activity shows this long (0 = never)
  // How aegisd tells a job's first activity (lifecycle/activity_anchor.h; defaults from the
  // H200 run's timelines, docs/daemon.md "The anchor"):
  double anchor_process_util = 0.10;     // its own per-process utilisation sample at least this
  double anchor_activity_rise = 0.10;    // else its GPU's activity this much above it at context creation
  int anchor_sustained_samples = 3;      // ... in this many samples in a row (warm-up kernels are not training)
  Seconds anchor_plateau_s = 10;         // else its memory, grown past its context, steady this long
  MiB anchor_plateau_tolerance_mib = 64; // "steady": within this much
  // Arrays (issue 32 item 3, lifecycle/holds.h): an array's probe has reached its memory
  // peak when its memory has not grown (past the tolerance above) this long after its first
  // activity, or when it completed; then the other elements go, with its peak + margin.
  Seconds array_probe_settle_s = 60;
  // Off: arrays keep their `%N` cap but every element goes at once, unprobed (the study's
  // "arrays without probing", docs/lab-policies.md; a lab that prefers no probe).
  bool array_probe = true;
  // On: an element released with its probe's learned floor (or to run alone) that no GPU
  // offers yet is passed over (keeps its place, blocks nothing) while another element of
  // its array runs; with none running it blocks as any head (docs/lab-policies.md,
  // "Arrays"). Acts only on array elements: without `--array` jobs the published loop.
  bool array_floor_pass_over = true;

  // --- Stage 3: runtime-pressure filter ------------------------------------------------
  bool pressure_filter = true;
  int telemetry_window_samples = 30;
  double telemetry_sample_hz = 1.0;
  RiskWeights risk_weights{};            // 0.25 each of mean, median, p95, EWMA
  double smact_threshold = 0.65;         // exclude iff SMACT >= a AND (SMOCC >= b OR DRAMA >= c)
  double smocc_threshold = 0.35;
  double drama_threshold = 0.50;
  double util_threshold = 0.70;          // coarse fallback: keep iff utilisation < this

  // --- Stage 4: placement --------------------------------------------------------------
  bool collocate = true;                 // false = one job per GPU (the exclusive policy)
  bool exclusive_first = true;           // idle GPUs go to the head job alone first
  bool strict_head_of_line = true;       // if the head cannot be placed, nothing else is tried
  // Issue 32 item 5 (lifecycle/backfill.h): with strict head-of-line, a later job with a time
  // limit may start while the head waits if it ends before the head's reserved start.
  bool backfill = false;
  // With backfill, a job is also expected to end after this quantile of its signature's last
  // successful runs, once it has this many (0: time limits only; lifecycle/estimate_chain.h).
  int backfill_history_runs = 0;  // off: limits only (docs/config.md says why)
  double backfill_history_quantile = 0.9;
  // With backfill, which running jobs a job started out of order may join on their GPUs:
  // any, only those expected to end no later than it (earlier_ending), only those expected
  // to end by the head's reserved start (by_reservation), or none (idle GPUs only). Running
  // jobs have precedence, and under sharing a job that joins them slows them.
  std::string backfill_joins = "by_reservation";  // any | earlier_ending | by_reservation | none (docs/lab-policies.md)
  // With by_reservation, a running job a backfilled job joins is counted slowed by this
  // factor over what it has left (1 = not slowed): it may be joined only if it still ends
  // by the head's reserved start. 1.28: the 90th percentile of a job's slowdown over Lucid's
  // 1,388 measured pairs (docs/config.md, docs/lab-policies.md "Backfill").
  double backfill_join_slowdown = 1.28;
  std::string order = "magm";            // magm | bf | lug | ff | rr | lpu | lpa
  int max_jobs_per_gpu = 0;              // 0 = no cap
  double util_cap = 0;                   // Horus: sum of profiled utilisation <= cap (0 = off)
  int sharing_score_cap = -1;            // Lucid: sum of sharing scores <= cap (-1 = off)
  bool same_gpu_count = false;           // Lucid: only jobs with equal GPU counts share
  bool mps_one_user_per_gpu = true;      // under MPS: only one user's jobs share a GPU
  // Not a parameter: the driver's sharing mode (aegisd's `sharing`, aegis sim's
  // --sharing), which says whether the MPS rules apply.
  bool mps = false;

  // --- Stage 5: OOM-aware recovery -----------------------------------------------------
  std::string recovery = "ladder";       // ladder | retry
  std::vector<double> ladder_fractions{0.25, 0.50, 0.75};
  MiB ladder_max_step_mib = 8192;
  int retries_before_exclusive = 1;      // for recovery = retry

  // --- Lab scheduling: fair share and per-user caps (issue 32 item 2) -----------------
  // Read by the lifecycle (lifecycle/fair_share.h), not by the engine. No weight and no
  // cap set: the queues stay FIFO, exactly the published loop (docs/lab-policies.md).
  std::string fair_share_users;          // "NAME:WEIGHT,...,*:WEIGHT" ("" = none)
  std::string fair_share_groups;         // the same for Unix groups (a trace's group column)
  Seconds fair_share_half_life_s = 604800;  // usage decays by half in this time (Slurm's 7 days)
  std::string fair_share_charge = "occupied";  // occupied | booked (docs/lab-policies.md "Fair share")
  // What a pass's order counts of running jobs besides their usage so far: mean_run_time,
  // the rest of the mean run time of their user's ended attempts; none, nothing (Slurm's).
  std::string fair_share_committed = "mean_run_time";
  MiB user_max_gpu_mem_mib = 0;          // a user's booked GPU memory at once, all GPUs (0 = no cap)
  int user_max_running_jobs = 0;         // a user's running jobs at once (0 = no cap)

  // --- Lab scheduling: preemption (issue 32 item 1) ------------------------------------
  // Read by the lifecycle (lifecycle/preemption.h), in aegisd and the simulator alike, when
  // their `preemption` is on: an attempt younger than this is not a victim (Slurm's
  // PreemptExemptTime), so that a job just restarted is not the cheapest victim again.
  Seconds preempt_exempt_s = 600;
  // ... multiplied by this for each time the job was preempted before (its attempts
  // stopped by preemption): 2 doubles it each time, so a job that is the only candidate
  // is not stopped every preempt_exempt_s of its run. 1: the same for every attempt.
  double preempt_exempt_growth = 1;

  // Memory guard for a GPU of this size: max(min, ceil(fraction * total)).
  MiB memory_guard(MiB total_mib) const;
};

}  // namespace aegis
