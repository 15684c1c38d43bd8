// The layout of aegisd's database (state_dir/aegis.db, SQLite in WAL mode): every table
// and column, with its meaning. This file is the reference; docs/daemon.md ("The
// database") summarises it. Only src/runtime/store/store.cpp reads and writes it.
//
// Version
// -------
// meta('schema') holds the layout's version as text:
//   1  (aegisd up to issue 12) jobs(id, uid, state, queue_seq, submitted_at, data): each
//      job was the API's JSON view of it in `data`. Migrated to 2 when the store opens.
//   2  typed columns and child tables; no JSON anywhere.
//   3  lab scheduling (issue 32): new child tables (and columns) only, so the
//      migration from 2 is additive: CREATE TABLE IF NOT EXISTS for each new table, ALTER
//      TABLE ADD COLUMN for each missing column (Store::add_later_columns), in the opening
//      transaction; the rows already there get the defaults (no array, no dependency).
//   4  (this file) jobs.signature and its index jobs_signature: backfill's durations are
//      read at start per signature, its last history_window successful attempts only
//      (Store::recent_successful_runs), instead of every successful attempt. Migration from
//      3 (and from 1 or 2, after theirs), in the opening transaction: the column is added
//      (ALTER TABLE, '' for every row), every job with '' gets the signature its stored
//      fields make (Store::fill_signatures, the same string aegisd builds:
//      job/job_signature.h), then the index is created (one sort, not a write per job).
//      A version bump, not an additive change: an older aegisd would insert jobs without a
//      signature (''), which this one would never read; it refuses a schema-4 database
//      instead. A crash or an error in the migration leaves
//      the database as it was (schema 3: the transaction never committed), and an error
//      stops aegisd with one line ("database: migrate schema 3 to 4: ...").
// A database whose version is larger than kSchemaVersion is refused with one line: it was
// written by a newer aegisd, whose rows this one could misread or damage.
//
// Migration 1 -> 2 (Store's constructor, one transaction, nothing of it lands unless all
// of it does): `jobs` is renamed `jobs_v1`; the tables below are created; each row of
// jobs_v1 is read with the schema-1 reader (job_json.h, parse_job_record) and written as
// below under the same id; a row it cannot read goes to `quarantine` with the reason (its
// `data` as it was); the id sequence is carried over; jobs_v1 is dropped; meta('schema')
// becomes '2'. Schema 1 said how an attempt ended only in words: the migration derives
// attempts.exit_code and attempts.signal from the classifier's "exit status N" and
// "killed by signal N" (and an attempt's "failed to start: ..." becomes 'failed-start').
// A table that cannot be read (a damaged page) fails the migration: the database is left
// as it was, and aegisd says why and stops.
//
// Conventions
// -----------
// Every table is STRICT (SQLite checks each value's type on write). Times are REAL,
// seconds since the Unix epoch (wall clock). Memory is INTEGER MiB. Booleans are INTEGER
// 0 or 1 (CHECKed). NULL means "not known / not given" and only where a column says so.
// Lists are child tables keyed by (job_id, position), WITHOUT ROWID so that a job's rows
// lie together; they go with their job (ON DELETE CASCADE; foreign keys are on).
//
// jobs: one row per job, from submission on (finished jobs stay: `aegis history`).
//   id                 job id, never reused on a host (AUTOINCREMENT; also Store::reserve_ids_above)
//   uid, gid, user     who submitted it (from SO_PEERCRED, never from the request), user name
//   state              queued | running | completed | failed | cancelled (core/job_state.h)
//   queue              main | recovery while queued (recovery: after an OOM); '' otherwise
//   queue_seq          order within its queue (smaller first)
//   submitted_at       when it was accepted
//   started_at         first launch; NULL before
//   ended_at           when it reached a final state; NULL before
//   cancel_requested   a cancel was asked for (it is carried out even across restarts)
//   reason             why it failed, was cancelled or waits; '' when nothing to say
//   attached_pid       `aegis run` (submit with attach) process it belongs to; NULL: none
//   attached_start_ticks  that process's start time (field 22 of /proc/PID/stat), as the
//                      bits of the unsigned 64-bit value; NULL exactly when attached_pid is
//   recovery_floor_mib, recovery_exclusive_only, recovery_oom_count
//                      the OOM recovery ladder's state (core/job.h RecoveryState)
//   -- the request (runtime/api/request.h JobRequest), as validated at submission:
//   name, workdir      job name; absolute working directory ('' = the daemon's choice)
//   gpus               GPUs wanted (1..64)
//   mem_mib            declared memory per GPU; NULL: not declared
//   profiled_mib       a profiling run's solo peak per GPU; NULL: none
//   faketensor_mib     PyTorch FakeTensor's estimate per GPU; NULL: none
//   exclusive          runs alone on its GPUs
//   restartable        may run again when an attempt's outcome is unknown
//   hint_gpu_util      expected GPU utilisation in [0, 1]; NULL: no hint
//   hint_sharing_score 0, 1 or 2 (Lucid's sharing score); NULL: no hint
//   model_depth, model_total_activations, model_total_parameters, model_batch_size,
//   model_batchnorm_layers, model_dropout_layers, model_activation
//                      the learned estimator's features (estimate/features.h ModelFeatures);
//                      all NULL when the job has none, all set when it has
//   -- what aegisd made of it at submission (predicted_util: again while it waits, when
//      a run of its signature ends):
//   predicted_util     its predicted mean coarse GPU utilisation alone, REAL in [0, 1]
//                      (core/job.h JobSpec::predicted_util, read by the `lpa` order); NULL:
//                      none could be made
//   predicted_util_source  where it came from: 'history' | 'model-spec'; '' exactly when
//                      predicted_util is NULL (docs/estimators.md, "In aegisd: the lpa order")
//                      Both added in schema 2 without a version change: aegisd adds them to
//                      an older `jobs` when it opens the database (ALTER TABLE, in the opening
//                      transaction; its jobs get NULL and ''); an older aegisd names its own
//                      columns only, so its INSERTs leave them NULL and ''.
//   -- lab scheduling (issue 32, docs/lab-policies.md), added like the two above: an
//      older `jobs` gets them when aegisd opens it (kJobLabColumns), its jobs NULL:
//   time_limit_s       each attempt's wall-clock limit in seconds, as given (--time) or the
//                      server's default_time_limit_s at submission; NULL: none (item 5)
//   -- priorities and preemption (issue 32 item 1; kJobLabColumns):
//   priority           its priority level (--priority), -1000..1000; 0 by default
//   checkpoint_signal  the signal it wants before a preemption (--checkpoint-signal); 0: none
//   checkpoint_lead_s  the seconds it may take to save a checkpoint then; 0 with no signal
//   preempted_for      the job it is being preempted for (warned, not yet ended); NULL: none
//   preempt_warned_at  when it was warned (0: not being preempted)
//   preempt_stop_at    when it is stopped at the latest (0: not being preempted)
//   preempt_stopping   1 once its stop was asked for (a restart sends it again)
//   -- notifications (issue 32 item 6; kJobLabColumns):
//   notify             item 6: the events its owner is told of, the canonical comma list of
//                      runtime/api/notify_set.h ("start,end"); '' = none (the default)
//   -- schema 4:
//   signature          its history signature (job/job_signature.h signature_of: the user's
//                      uid, then the command with numbers normalised, working directory, GPU
//                      count and sorted tags, separated by the control characters 0x1e and
//                      0x1f), written with its argv and tags; derived, never read back
//                      into the job. '' only while a migration has not yet filled it
//   Index jobs_state(state): the unfinished jobs, read at every start.
//   Index jobs_signature(signature, state, ended_at): each signature's last completed jobs,
//                      read at start from the index's end (schema 4; Store::recent_successful_runs).
//
// job_args(job_id, pos, arg)        the command's argv: pos 0 is argv[0], then 1, 2, ...
// job_env(job_id, name, value)      the job's environment, one row per variable (the value
//                                   as given: it may hold '=' or any UTF-8)
// job_tags(job_id, pos, tag)        its tags, in the order given (pos 0, 1, ...)
// job_model_layers(job_id, layer, count)
//                                   ModelFeatures::layer_counts ("linear", "conv2d", ...)
//
// attempts: one row per start of a job (OOM recovery starts it again), numbered 1, 2, ...
//   job_id, number     the job; 1 for its first attempt
//   launched_at        when it was recorded, before its shim was started
//   first_activity     its first GPU process seen; NULL until then
//   exclusive          it was placed alone on its GPUs
//   admitted_mib       memory per GPU it was admitted with
//   free_at_placement_mib, gpu_total_mib   its GPU's free and total memory at placement
//   pgid               the job's process group (= session); 0 until its shim recorded it
//   shim_pid           its shim's pid (meaningful while the attempt's lock is held); 0: none
//   peak_mib           largest per-GPU memory of its processes seen (NVML)
//   ended_at           when it ended; NULL while it runs
//   outcome            '' (running) | completed | oom | failed | failed-start | cancelled |
//                      lost | unknown (core/job_state.h AttemptOutcome)
//   detail             the classifier's line ("exit status 3", the OOM message, ...)
//   exit_code          the exit status of the job's first process when it exited; NULL
//                      when it did not (killed, never started, not ended, not known)
//   signal             the signal that killed it; NULL when it was not killed by one
// attempt_gpus(job_id, number, pos, uuid)
//                                   the attempt's GPUs (UUIDs), in CUDA_VISIBLE_DEVICES order
//
// Kept from schema 1, unchanged:
// events(id, job_id, t, kind, detail)   every state change of a job, in order (aegis show)
// history(signature, peak_mib, runs, updated_at)
//                                   peak GPU memory per job signature (the history estimator
//                                   until history_runs; still read for signatures without them)
// attempt_anchors(job_id, number, context_at, anchor)
//                                   added in schema 2 without a version change (an older
//                                   aegisd never reads it): when the attempt's first process
//                                   showed (CUDA context; NULL: not yet) and what its
//                                   first_activity was told from ('' before it; else
//                                   lifecycle/activity_anchor.h's names: process-util,
//                                   gpu-activity, memory-plateau, reported). No row: neither known
// history_runs(id, signature, gpu_model, peak_mib, t, gpu_util, smact, smocc, drama)
//                                   added in schema 2 without a version change (a table an
//                                   older aegisd never reads): each completed run's peak per
//                                   GPU model, the last history_window per signature and model.
//                                   gpu_util .. drama (REAL in [0, 1], NULL: not measured): the
//                                   run's mean coarse utilisation, SM activity, SM occupancy and
//                                   DRAM activity (estimate/history.h RunActivity; which samples
//                                   count: docs/estimators.md, "Utilisation from history"). Added
//                                   later, also without a version change: an older aegisd's
//                                   INSERT names its five columns and leaves them NULL, and the
//                                   store adds them to an older table at start (ALTER TABLE,
//                                   in the opening transaction; its rows keep NULL).
// quarantine(id, uid, state, data, reason, t)
//                                   jobs whose rows could not be read at start, set aside
//                                   (their ids are never given out again): `data` is the
//                                   schema-1 JSON as it was, or for a schema-2 job a text
//                                   copy of its rows (table: column=value ...); `reason`
//                                   says what was wrong; `t` when it was set aside
// job_array(job_id, array_id, array_index, array_limit)   (schema 3, issue 32 item 3)
//                                   the job is element `array_index` of the array whose id
//                                   is `array_id` (its first element's job id: its own for
//                                   that one); array_limit: the array's cap (%N), 0: none.
//                                   No row: not an element. Written at submission only.
// job_after(job_id, pos, dep_id, kind)                     (schema 3, issue 32 item 4)
//                                   its dependencies (--after), as the lifecycle expanded
//                                   them (an array's id: each element): it may start once
//                                   job dep_id ended as `kind` asks (ok | any | failed).
//                                   Written at submission only.
// meta(key, value)                  'schema' -> the version above
#pragma once

namespace aegis::store_schema {

inline constexpr int kSchemaVersion = 4;

// Creates every table of schema 2 that is missing (and meta, without its version row).
inline constexpr const char* kCreateTables = R"(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL,
  user TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
  queue TEXT NOT NULL CHECK (queue IN ('main', 'recovery', '')),
  queue_seq INTEGER NOT NULL,
  submitted_at REAL NOT NULL,
  started_at REAL,
  ended_at REAL,
  cancel_requested INTEGER NOT NULL CHECK (cancel_requested IN (0, 1)),
  reason TEXT NOT NULL,
  attached_pid INTEGER,
  attached_start_ticks INTEGER,
  recovery_floor_mib INTEGER NOT NULL,
  recovery_exclusive_only INTEGER NOT NULL CHECK (recovery_exclusive_only IN (0, 1)),
  recovery_oom_count INTEGER NOT NULL,
  name TEXT NOT NULL,
  workdir TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  mem_mib INTEGER,
  profiled_mib INTEGER,
  faketensor_mib INTEGER,
  exclusive INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
  restartable INTEGER NOT NULL CHECK (restartable IN (0, 1)),
  hint_gpu_util REAL,
  hint_sharing_score INTEGER,
  model_depth INTEGER,
  model_total_activations REAL,
  model_total_parameters REAL,
  model_batch_size INTEGER,
  model_batchnorm_layers INTEGER,
  model_dropout_layers INTEGER,
  model_activation TEXT,
  predicted_util REAL CHECK (predicted_util IS NULL OR (predicted_util >= 0 AND predicted_util <= 1)),
  predicted_util_source TEXT NOT NULL DEFAULT '' CHECK (predicted_util_source IN ('', 'history', 'model-spec')),
  time_limit_s INTEGER CHECK (time_limit_s IS NULL OR time_limit_s >= 1),
  priority INTEGER NOT NULL DEFAULT 0,
  checkpoint_signal INTEGER NOT NULL DEFAULT 0,
  checkpoint_lead_s REAL NOT NULL DEFAULT 0,
  preempted_for INTEGER,
  preempt_warned_at REAL NOT NULL DEFAULT 0,
  preempt_stop_at REAL NOT NULL DEFAULT 0,
  preempt_stopping INTEGER NOT NULL DEFAULT 0 CHECK (preempt_stopping IN (0, 1)),
  notify TEXT NOT NULL DEFAULT '',
  signature TEXT NOT NULL DEFAULT '',
  CHECK ((state = 'queued') = (queue <> '')),
  CHECK ((attached_pid IS NULL) = (attached_start_ticks IS NULL))
) STRICT;
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS job_args (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  pos INTEGER NOT NULL,
  arg TEXT NOT NULL,
  PRIMARY KEY (job_id, pos)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_env (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (job_id, name)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_tags (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  pos INTEGER NOT NULL,
  tag TEXT NOT NULL,
  PRIMARY KEY (job_id, pos)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_model_layers (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  layer TEXT NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (job_id, layer)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_array (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  array_id INTEGER NOT NULL,
  array_index INTEGER NOT NULL CHECK (array_index >= 0),
  array_limit INTEGER NOT NULL DEFAULT 0 CHECK (array_limit >= 0)
) STRICT;
CREATE INDEX IF NOT EXISTS job_array_id ON job_array(array_id);
CREATE TABLE IF NOT EXISTS job_after (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  pos INTEGER NOT NULL,
  dep_id INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('ok', 'any', 'failed')),
  PRIMARY KEY (job_id, pos)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS attempts (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  number INTEGER NOT NULL CHECK (number >= 1),
  launched_at REAL NOT NULL,
  first_activity REAL,
  exclusive INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
  admitted_mib INTEGER NOT NULL,
  free_at_placement_mib INTEGER NOT NULL,
  gpu_total_mib INTEGER NOT NULL,
  pgid INTEGER NOT NULL,
  shim_pid INTEGER NOT NULL,
  peak_mib INTEGER NOT NULL,
  ended_at REAL,
  outcome TEXT NOT NULL
    CHECK (outcome IN ('', 'completed', 'oom', 'failed', 'failed-start', 'cancelled', 'lost', 'unknown')),
  detail TEXT NOT NULL,
  exit_code INTEGER,
  signal INTEGER,
  PRIMARY KEY (job_id, number)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS attempt_gpus (
  job_id INTEGER NOT NULL,
  number INTEGER NOT NULL,
  pos INTEGER NOT NULL,
  uuid TEXT NOT NULL,
  PRIMARY KEY (job_id, number, pos),
  FOREIGN KEY (job_id, number) REFERENCES attempts(job_id, number) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS attempt_anchors (
  job_id INTEGER NOT NULL,
  number INTEGER NOT NULL,
  context_at REAL,
  anchor TEXT NOT NULL CHECK (anchor IN ('', 'reported', 'process-util', 'gpu-activity', 'memory-plateau')),
  PRIMARY KEY (job_id, number),
  FOREIGN KEY (job_id, number) REFERENCES attempts(job_id, number) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  t REAL NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_job ON events(job_id);
CREATE TABLE IF NOT EXISTS history (
  signature TEXT PRIMARY KEY,
  peak_mib INTEGER NOT NULL,
  runs INTEGER NOT NULL,
  updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS history_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  signature TEXT NOT NULL,
  gpu_model TEXT NOT NULL,
  peak_mib INTEGER NOT NULL,
  t REAL NOT NULL,
  gpu_util REAL CHECK (gpu_util IS NULL OR (gpu_util >= 0 AND gpu_util <= 1)),
  smact REAL CHECK (smact IS NULL OR (smact >= 0 AND smact <= 1)),
  smocc REAL CHECK (smocc IS NULL OR (smocc >= 0 AND smocc <= 1)),
  drama REAL CHECK (drama IS NULL OR (drama >= 0 AND drama <= 1))
);
CREATE INDEX IF NOT EXISTS history_runs_key ON history_runs(signature, gpu_model, id);
CREATE TABLE IF NOT EXISTS quarantine (id INTEGER PRIMARY KEY, uid, state, data, reason TEXT, t REAL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
)";

// The columns add_later_columns (store.cpp) adds to an older history_runs.
inline constexpr const char* kHistoryActivityColumns[] = {"gpu_util", "smact", "smocc", "drama"};

// The columns add_later_columns (store.cpp) adds to an older jobs table: name and
// declaration, as in kCreateTables (ADD COLUMN takes a column's own CHECK, and a NOT NULL
// column needs its DEFAULT).
inline constexpr const char* kJobPredictionColumns[][2] = {
    {"predicted_util", "REAL CHECK (predicted_util IS NULL OR (predicted_util >= 0 AND predicted_util <= 1))"},
    {"predicted_util_source",
     "TEXT NOT NULL DEFAULT '' CHECK (predicted_util_source IN ('', 'history', 'model-spec'))"}};

// jobs' lab-scheduling columns (issue 32), added to an older `jobs` (Store::add_later_columns).
inline constexpr const char* kJobLabColumns[][2] = {
    {"time_limit_s", "INTEGER CHECK (time_limit_s IS NULL OR time_limit_s >= 1)"},  // item 5
    // item 1: priorities and preemption
    {"priority", "INTEGER NOT NULL DEFAULT 0"},
    {"checkpoint_signal", "INTEGER NOT NULL DEFAULT 0"},
    {"checkpoint_lead_s", "REAL NOT NULL DEFAULT 0"},
    {"preempted_for", "INTEGER"},
    {"preempt_warned_at", "REAL NOT NULL DEFAULT 0"},
    {"preempt_stop_at", "REAL NOT NULL DEFAULT 0"},
    {"preempt_stopping", "INTEGER NOT NULL DEFAULT 0 CHECK (preempt_stopping IN (0, 1))"},
    {"notify", "TEXT NOT NULL DEFAULT ''"},  // item 6
};

// jobs' signature (schema 4), added to an older `jobs` (Store::add_later_columns), and its
// index, created after that (an older `jobs` has no such column before).
inline constexpr const char* kJobSignatureColumn[2] = {"signature", "TEXT NOT NULL DEFAULT ''"};
inline constexpr const char* kCreateSignatureIndex =
    "CREATE INDEX IF NOT EXISTS jobs_signature ON jobs(signature, state, ended_at)";

// The tables that hold a job (the quarantine copies their rows, in this order).
inline constexpr const char* kJobTables[] = {"jobs", "job_args", "job_env", "job_tags", "job_model_layers",
                                             "attempts", "attempt_gpus", "job_array", "job_after"};

}  // namespace aegis::store_schema
