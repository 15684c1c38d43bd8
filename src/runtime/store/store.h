// The daemon's durable state: one SQLite database (WAL) in the state directory. Every
// job is a row of typed columns with child rows for its lists and attempts (the layout,
// version and migration: store/schema.h); every state change is an event row. A change is
// committed before the daemon acts on it or replies.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "estimate/history.h"
#include "runtime/job/job.h"

struct sqlite3;
struct sqlite3_stmt;

namespace aegis {

// Every error of the store, as one line ("database: select jobs: database disk image is
// malformed"). `disk_full`: the file system (or SQLite's size limit) ran out of room
// (SQLITE_FULL, or SQLITE_IOERR with errno ENOSPC), so the daemon can say "disk full".
struct StoreError : std::runtime_error {
  explicit StoreError(const std::string& what, bool full = false) : std::runtime_error(what), disk_full(full) {}
  bool disk_full = false;
};

// A job whose record could not be read at start: moved from `jobs` into the table
// `quarantine` (with the reason), so that one bad row does not keep the daemon down.
struct Quarantined {
  JobId id = 0;
  std::string reason;
};

class Store {
 public:
  // Opens (creating if needed) the database. `full_sync`: fsync at every commit
  // (survives power loss); otherwise the WAL survives process crashes only.
  // A database of an older layout is migrated to the current one, in one transaction,
  // before anything else (store/schema.h); one of a newer layout than this aegisd knows
  // is refused (StoreError, one line), and so is one whose migration fails.
  // Refuses (StoreError) a database file, -wal or -shm that is not a regular file (a
  // symbolic link, say), is not owned by the effective uid, has more than one hard link or
  // is writable by group or others.
  Store(const std::string& path, bool full_sync);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Group commit: changes between begin() and commit() land together. A commit that fails
  // rolls the transaction back (and throws). rollback() never throws and does nothing when
  // no transaction is open (SQLite may have rolled it back itself, after SQLITE_FULL say).
  void begin();
  void commit();
  void rollback() noexcept;
  bool in_transaction() const;
  // True when the last error of this store was the disk being full (see StoreError).
  bool last_error_was_full() const { return last_error_full_; }
  // Issue 33 item 6: the -wal was lost before this open (store/wal_check.h): what is gone.
  const std::optional<std::string>& wal_lost() const { return wal_lost_; }

  // Makes the next inserted job's id larger than `floor` (ids are never reused on a host:
  // per-attempt files live under STATE_DIR/jobs/<id>/). Never lowers it.
  void reserve_ids_above(JobId floor);

  // Gives the job its id and queue position and saves it: its row and child rows, in one
  // transaction (inside the caller's, if one is open).
  void insert(DaemonJob& job);
  // Rewrites the job's row and attempts (and its request's lists when they changed since
  // this store last wrote or loaded them), in one transaction. A job that is not in the
  // table (set aside, say) is left alone.
  void update(const DaemonJob& job);
  // Issue 33 item 6: saves a job under its own id (a record rebuilt after it was lost).
  void restore(const DaemonJob& job) { write(job, Write::InsertWithId); }
  void event(JobId id, Seconds t, const std::string& kind, const std::string& detail);

  // A quarantined id throws StoreError (its record is damaged and was set aside).
  // get, list and events read what is committed (see rdb_).
  std::optional<DaemonJob> get(JobId id);
  // Issue 32: a job's array and dependencies (job_array, job_after), written once, after its
  // insert (an array's first element names its own id); and every element of an array.
  void write_links(JobId id, const DaemonJob& job);
  std::vector<JobId> array_elements(JobId array_id);
  // Queued and running, by queue order. A job whose rows cannot be read (a value of the
  // wrong type or out of range, a request that no longer validates) is moved to the table
  // `quarantine` and listed in last_quarantined(); an error reading the tables throws.
  // The first call also lists the records the migration at open set aside.
  std::vector<DaemonJob> unfinished();
  const std::vector<Quarantined>& last_quarantined() const { return quarantined_; }
  // Newest first when `all`. Rows whose record cannot be parsed are skipped and counted in
  // last_list_skipped(); an error reading the table (SQLITE_CORRUPT, I/O) throws.
  std::vector<DaemonJob> list(bool all, std::int64_t limit);
  std::int64_t last_list_skipped() const { return list_skipped_; }
  // One page of the jobs table, newest first: ids below `before` (0: from the newest), at
  // most `limit`, only `uid`'s when given. For listings sent in parts (a reply never holds
  // more than a page); skipped rows are counted as by list().
  // Issue 33 item 1: with `listing_bytes` > 0 (a listing, which cuts each string there), each
  // argv string is read up to listing_bytes + 1 characters only and the environment not at
  // all: a job's megabytes of argv are neither copied nor checked to be cut afterwards.
  // `argv` false (a listing that does not show the request): no argv either, and the
  // request is not validated (a plain read of the job still is).
  std::vector<DaemonJob> list_page(JobId before, std::int64_t limit, std::optional<uid_t> uid = std::nullopt,
                                   std::size_t listing_bytes = 0, bool argv = true);
  // The id the next insert will get (inside the open transaction, if any).
  JobId next_id();
  std::int64_t next_queue_seq();

  struct Event {
    JobId job;
    Seconds t;
    std::string kind, detail;
  };
  std::vector<Event> events(JobId id);

  // Peak GPU memory (per GPU) observed for job signatures (estimate/history.h).
  void record_peak(const std::string& signature, MiB peak_mib, Seconds t);
  std::map<std::string, MiB> peaks();  // signature -> largest recorded peak
  // One completed run's peak and mean activity on a GPU model; only the last `keep` per
  // signature and model stay.
  void record_run_peak(const std::string& signature, const std::string& gpu_model, MiB peak_mib,
                       const RunActivity& activity, Seconds t, int keep);
  using RunPeaks = std::map<std::string, std::map<std::string, std::vector<MiB>>>;
  using RunUtils = std::map<std::string, std::map<std::string, std::vector<double>>>;
  struct HistoryRuns {
    RunPeaks peaks;  // signature -> GPU model -> peaks, oldest first
    RunUtils utils;  // signature -> GPU model -> coarse utilisation of the runs that have one, oldest first
  };
  HistoryRuns history_runs();
  // Every attempt that ended at or after `since` (a launch that never started left out),
  // with its job's user and group: fair share's usage, recomputed at start (issue 32 item 2).
  struct EndedAttempt {
    std::int64_t uid = 0, gid = 0;
    Seconds launched_at = 0, ended_at = 0;
    bool exclusive = false;
    MiB admitted_mib = 0, gpu_total_mib = 0;
    int gpus = 0;
    std::vector<std::string> gpu_uuids;  // which GPUs (fair_share_charge = occupied splits each)
  };
  std::vector<EndedAttempt> attempts_ended_since(Seconds since);
  // Each signature's last `per_signature` (at least 1) attempts that completed successfully,
  // oldest end first: backfill's durations, rebuilt at start (issue 32). "Last" by their jobs'
  // end (the attempt's own, but for a job whose end aegisd learnt only at a later start: then;
  // ties: the larger job id). Read through the index jobs_signature (schema 4): the other
  // successful attempts are never read, nor any job's argv or tags.
  struct RecentRun {
    std::string signature;  // job/job_signature.h signature_of
    Seconds launched_at = 0, ended_at = 0;
  };
  std::vector<RecentRun> recent_successful_runs(int per_signature);

 private:
  enum class Write { Insert, InsertWithId, Update };

  void exec(const char* sql, const char* what);
  sqlite3_stmt* prepare(const char* sql) { return prepare(db_, sql); }
  sqlite3_stmt* prepare(sqlite3* db, const char* sql);
  // A statement prepared once and kept (keyed by `sql`'s address: a literal or a string
  // that lives as long as the program); the caller resets it when done (store.cpp: Use).
  sqlite3_stmt* cached(sqlite3* db, const char* sql);
  void check(int rc, const char* what, sqlite3* db = nullptr);  // throws unless rc is SQLITE_OK
  void step_done(sqlite3_stmt* s, const char* what, sqlite3* db = nullptr);  // throws unless SQLITE_DONE
  [[noreturn]] void fail(const std::string& what, sqlite3* db = nullptr);

  void open_schema(const std::string& path);
  void migrate_from_1();
  void add_later_columns();
  void fill_signatures(int from_version);
  void write_signature(JobId id, const DaemonJob& job);
  // The strings of one job that `s` (a statement taking the job id as ?1) selects, in order.
  void job_strings(sqlite3_stmt* s, JobId id, std::vector<std::string>& out);
  void set_id_sequence_at_least(JobId floor);
  JobId write(const DaemonJob& job, Write how);
  void write_request_lists(JobId id, const api::JobRequest& request, bool replace);
  void write_attempts(JobId id, const std::vector<Attempt>& attempts, bool replace);
  // The job of the current row of `s` (the columns of `jobs`, read on `db`) with its child
  // rows. nullopt and `error` (one line) when a value is wrong; StoreError when the
  // database cannot be read.
  std::optional<DaemonJob> read_job(sqlite3* db, sqlite3_stmt* s, std::string& error);
  std::string copy_of_rows(JobId id);
  void quarantine(const Quarantined& q);
  std::vector<DaemonJob> listed(sqlite3_stmt* s);

  sqlite3* db_ = nullptr;
  // The reads of requests (get, list, events) go through a second, read-only connection:
  // an error there (a damaged page) fails that request only. On db_ it would doom the
  // whole group-commit transaction (SQLite then fails its COMMIT), losing others' changes.
  // It sees what is committed: a change made earlier in the same group commit is not seen.
  sqlite3* rdb_ = nullptr;
  std::int64_t next_seq_ = 1;
  bool last_error_full_ = false;
  std::optional<std::string> wal_lost_;
  std::vector<Quarantined> quarantined_;
  std::vector<Quarantined> migration_quarantined_;  // reported by the first unfinished()
  std::int64_t list_skipped_ = 0;
  std::size_t listing_bytes_ = 0;  // list_page's, while it reads (read_job)
  bool listing_argv_ = true;
  std::map<std::pair<sqlite3*, const char*>, sqlite3_stmt*> statements_;
  // A digest of each job's request lists (argv, environment, tags, layer counts) as last
  // written or loaded through db_, so that update() rewrites those rows only when they
  // changed (the daemon updates a job at every state change; its request never changes).
  // Forgotten on any error or rollback of db_: the next update then rewrites them.
  std::unordered_map<JobId, std::uint64_t> lists_written_;
};

}  // namespace aegis
