#include "runtime/store/store.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sqlite3.h>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/job/job_json.h"  // the schema-1 reader: for the migration only
#include "runtime/job/job_signature.h"
#include "runtime/store/schema.h"
#include "runtime/store/wal_check.h"

namespace aegis {

namespace {

using store_schema::kSchemaVersion;

// Finalises a prepared statement on every path.
struct Stmt {
  sqlite3_stmt* s;
  ~Stmt() { sqlite3_finalize(s); }
};

// Resets a cached statement (and drops its bindings, which may point at the caller's
// strings) on every path.
struct Use {
  sqlite3_stmt* s;
  ~Use() {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
};

// The columns of `jobs` (store/schema.h), in the order every statement binds (?1 ...) and
// reads (column 0 ...) them.
constexpr std::array<const char*, 45> kJobColumns = {
    "id", "uid", "gid", "user", "state", "queue", "queue_seq", "submitted_at", "started_at", "ended_at",
    "cancel_requested", "reason", "attached_pid", "attached_start_ticks", "recovery_floor_mib",
    "recovery_exclusive_only", "recovery_oom_count", "name", "workdir", "gpus", "mem_mib", "profiled_mib",
    "faketensor_mib", "exclusive", "restartable", "hint_gpu_util", "hint_sharing_score", "model_depth",
    "model_total_activations", "model_total_parameters", "model_batch_size", "model_batchnorm_layers",
    "model_dropout_layers", "model_activation", "predicted_util", "predicted_util_source",
    "time_limit_s",  // issue 32 item 5
    // issue 32 item 1
    "priority", "checkpoint_signal", "checkpoint_lead_s", "preempted_for", "preempt_warned_at", "preempt_stop_at",
    "preempt_stopping",
    "notify"};  // issue 32 item 6
enum JobCol : int {
  kId, kUid, kGid, kUser, kState, kQueue, kQueueSeq, kSubmittedAt, kStartedAt, kEndedAt,
  kCancelRequested, kReason, kAttachedPid, kAttachedStartTicks, kRecoveryFloorMib,
  kRecoveryExclusiveOnly, kRecoveryOomCount, kName, kWorkdir, kGpus, kMemMib, kProfiledMib,
  kFaketensorMib, kExclusive, kRestartable, kHintGpuUtil, kHintSharingScore, kModelDepth,
  kModelTotalActivations, kModelTotalParameters, kModelBatchSize, kModelBatchnormLayers,
  kModelDropoutLayers, kModelActivation, kPredictedUtil, kPredictedUtilSource,
  kTimeLimitS,  // issue 32 item 5
  kPriority, kCheckpointSignal, kCheckpointLeadS, kPreemptedFor, kPreemptWarnedAt, kPreemptStopAt, kPreemptStopping,
  kNotify,  // schema 3 (issue 32)
  kJobColumnCount
};
static_assert(kJobColumnCount == kJobColumns.size());

constexpr std::array<const char*, 16> kAttemptColumns = {
    "job_id", "number", "launched_at", "first_activity", "exclusive", "admitted_mib", "free_at_placement_mib",
    "gpu_total_mib", "pgid", "shim_pid", "peak_mib", "ended_at", "outcome", "detail", "exit_code", "signal"};
enum AttemptCol : int {
  aJobId, aNumber, aLaunchedAt, aFirstActivity, aExclusive, aAdmittedMib, aFreeAtPlacementMib, aGpuTotalMib,
  aPgid, aShimPid, aPeakMib, aEndedAt, aOutcome, aDetail, aExitCode, aSignal, kAttemptColumnCount
};
static_assert(kAttemptColumnCount == kAttemptColumns.size());

// The names from `from` on, each written by `item(name, its parameter number)`, joined
// with ", ".
template <std::size_t N, class F>
std::string joined(const std::array<const char*, N>& names, std::size_t from, F&& item) {
  std::string out;
  for (std::size_t i = from; i < N; ++i) {
    if (!out.empty()) out += ", ";
    out += item(std::string(names[i]), "?" + std::to_string(i + 1));
  }
  return out;
}

// Every statement on jobs and attempts, written out once from the column lists.
struct Sql {
  std::string select_job, select_unfinished, select_all_limit, select_unfinished_limit, select_page,
      select_page_uid, insert_job, update_job, select_attempts, upsert_attempt;
  Sql() {
    auto name = [](const std::string& n, const std::string&) { return n; };
    auto param = [](const std::string&, const std::string& p) { return p; };
    auto assign = [](const std::string& n, const std::string& p) { return n + " = " + p; };
    auto from_new = [](const std::string& n, const std::string&) { return n + " = excluded." + n; };
    const std::string cols = joined(kJobColumns, 0, name);
    const std::string from = "SELECT " + cols + " FROM jobs ";
    select_job = from + "WHERE id = ?1";
    select_unfinished = from + "WHERE state IN ('queued', 'running') ORDER BY queue_seq";
    select_all_limit = from + "ORDER BY id DESC LIMIT ?1";
    select_unfinished_limit = from + "WHERE state IN ('queued', 'running') ORDER BY queue_seq LIMIT ?1";
    select_page = from + "WHERE id < ?1 ORDER BY id DESC LIMIT ?2";
    select_page_uid = from + "WHERE id < ?1 AND uid = ?2 ORDER BY id DESC LIMIT ?3";
    insert_job = "INSERT INTO jobs(" + cols + ") VALUES(" + joined(kJobColumns, 0, param) + ")";
    update_job = "UPDATE jobs SET " + joined(kJobColumns, 1, assign) + " WHERE id = ?1";
    const std::string attempt_cols = joined(kAttemptColumns, 0, name);
    select_attempts = "SELECT " + attempt_cols + " FROM attempts WHERE job_id = ?1 ORDER BY number";
    // An attempt that did not change is not written (ended ones, mostly): a page less to
    // log at each commit.
    auto old_value = [](const std::string& n, const std::string&) { return "attempts." + n; };
    auto new_value = [](const std::string& n, const std::string&) { return "excluded." + n; };
    upsert_attempt = "INSERT INTO attempts(" + attempt_cols + ") VALUES(" + joined(kAttemptColumns, 0, param) +
                     ") ON CONFLICT(job_id, number) DO UPDATE SET " + joined(kAttemptColumns, 2, from_new) +
                     " WHERE (" + joined(kAttemptColumns, 2, old_value) + ") IS NOT (" +
                     joined(kAttemptColumns, 2, new_value) + ")";
  }
};

const Sql& sql() {
  static const Sql s;
  return s;
}

// Error messages are one line: they go into replies and the daemon's log.
std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

bool disk_full(sqlite3* db) {
  const int code = sqlite3_extended_errcode(db) & 0xff;
  return code == SQLITE_FULL || (code == SQLITE_IOERR && sqlite3_system_errno(db) == ENOSPC);
}

// The database file, its -wal and -shm: each, when it exists, must be a regular file of
// ours alone (a file another user controls, or a link to one, is not our database).
void check_db_file(const std::string& f) {
  struct stat st {};
  if (lstat(f.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw StoreError(f + ": " + std::strerror(errno) + ": refusing to use it");
  }
  const uid_t me = geteuid();
  if (S_ISLNK(st.st_mode)) throw StoreError(f + ": is a symbolic link: refusing to use it");
  if (!S_ISREG(st.st_mode)) throw StoreError(f + ": not a regular file: refusing to use it");
  if (st.st_uid != me)
    throw StoreError(f + ": owned by uid " + std::to_string(st.st_uid) + ", not by aegisd (uid " + std::to_string(me) +
                     "): refusing to use it");
  if (st.st_nlink != 1)
    throw StoreError(f + ": has " + std::to_string(st.st_nlink) + " hard links: refusing to use it");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[16];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw StoreError(f + ": writable by group or others (mode " + mode + "): refusing to use it");
  }
}

// A schema-1 job record (the JSON text in column `col` of the current row of `s`, the row
// of job `row_id`); nullopt and `error` when it cannot be read or parsed.
std::optional<DaemonJob> read_v1_record(sqlite3_stmt* s, int col, JobId row_id, std::string& error) {
  if (sqlite3_column_type(s, col) == SQLITE_NULL) {
    error = "job record: missing (NULL)";
    return std::nullopt;
  }
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  if (!text) throw std::bad_alloc();
  auto job = parse_job_record(std::string_view(text, static_cast<std::size_t>(sqlite3_column_bytes(s, col))), error);
  if (job && job->id != row_id) {
    error = "job record: names job " + std::to_string(job->id) + ", not its row's " + std::to_string(row_id);
    return std::nullopt;
  }
  return job;
}

// Text of a column, "" for NULL (never a std::string from a null pointer).
std::string column_string(sqlite3_stmt* s, int col) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  if (!text) return {};
  return std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(s, col)));
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The database's path with its directory's symbolic links resolved: SQLITE_OPEN_NOFOLLOW
// refuses a link anywhere in the path, but only the file itself (which others might swap)
// matters; the directory is the administrator's choice (/var/lib/aegis may be a link).
std::string resolve_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  char* real = realpath(dir.c_str(), nullptr);
  if (!real) return path;  // the open fails and says so
  std::string out = real;
  std::free(real);
  if (out.empty() || out.back() != '/') out += '/';
  return out + (slash == std::string::npos ? path : path.substr(slash + 1));
}

// FNV-1a over the request's lists, each value prefixed by its length.
class Digest {
 public:
  void add(std::string_view s) {
    add_number(s.size());
    for (unsigned char c : s) mix(c);
  }
  void add_number(std::uint64_t n) {
    for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(n >> (8 * i)));
  }
  std::uint64_t value() const { return h_; }

 private:
  void mix(unsigned char c) { h_ = (h_ ^ c) * 1099511628211ull; }
  std::uint64_t h_ = 14695981039346656037ull;
};

std::uint64_t lists_digest(const api::JobRequest& r) {
  Digest d;
  d.add_number(r.command.size());
  for (const auto& a : r.command) d.add(a);
  d.add_number(r.env.size());
  for (const auto& [k, v] : r.env) {
    d.add(k);
    d.add(v);
  }
  d.add_number(r.tags.size());
  for (const auto& t : r.tags) d.add(t);
  d.add_number(r.model ? r.model->layer_counts.size() + 1 : 0);
  if (r.model)
    for (const auto& [k, n] : r.model->layer_counts) {
      d.add(k);
      d.add_number(static_cast<std::uint64_t>(n));
    }
  return d.value();
}

// Reads the columns of one row, checking each value's type and range; the first problem
// is kept in `error` ("jobs.gpus: not an integer") and later reads give defaults.
class Row {
 public:
  Row(sqlite3_stmt* s, const char* table, std::string& error) : s_(s), table_(table), error_(error) {}
  bool ok() const { return error_.empty(); }

  std::int64_t integer(int col, const char* name, std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
    if (!ok()) return lo;
    if (sqlite3_column_type(s_, col) != SQLITE_INTEGER) return wrong(name, "not an integer"), lo;
    const std::int64_t v = sqlite3_column_int64(s_, col);
    if (v < lo || v > hi)
      return wrong(name, std::to_string(v) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"),
             lo;
    return v;
  }
  std::optional<std::int64_t> opt_integer(int col, const char* name,
                                          std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                          std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
    return integer(col, name, lo, hi);
  }
  int int32(int col, const char* name, std::int64_t lo = std::numeric_limits<int>::min(),
            std::int64_t hi = std::numeric_limits<int>::max()) {
    return static_cast<int>(integer(col, name, lo, hi));
  }
  std::optional<int> opt_int32(int col, const char* name, std::int64_t lo = std::numeric_limits<int>::min(),
                               std::int64_t hi = std::numeric_limits<int>::max()) {
    const auto v = opt_integer(col, name, lo, hi);
    if (!v) return std::nullopt;
    return static_cast<int>(*v);
  }
  bool boolean(int col, const char* name) { return integer(col, name, 0, 1) == 1; }
  double real(int col, const char* name) {
    if (!ok()) return 0;
    const int type = sqlite3_column_type(s_, col);
    if (type != SQLITE_FLOAT && type != SQLITE_INTEGER) return wrong(name, "not a number"), 0;
    const double v = sqlite3_column_double(s_, col);
    if (!std::isfinite(v)) return wrong(name, "not a finite number"), 0;
    return v;
  }
  std::optional<double> opt_real(int col, const char* name) {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
    return real(col, name);
  }
  std::string text(int col, const char* name) {
    if (!ok()) return {};
    if (sqlite3_column_type(s_, col) != SQLITE_TEXT) return wrong(name, "not text"), std::string();
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    if (!p) throw std::bad_alloc();
    return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, col)));
  }
  std::optional<std::string> opt_text(int col, const char* name) {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
    return text(col, name);
  }
  void wrong(const char* name, const std::string& what) {
    if (ok()) error_ = std::string(table_) + "." + name + ": " + what;
  }

 private:
  sqlite3_stmt* s_;
  const char* table_;
  std::string& error_;
};

// A value of a row, as SQL writes it (for the quarantine's copy of a job's rows).
std::string sql_literal(sqlite3_stmt* s, int col) {
  switch (sqlite3_column_type(s, col)) {
    case SQLITE_NULL: return "NULL";
    case SQLITE_INTEGER: return std::to_string(sqlite3_column_int64(s, col));
    case SQLITE_FLOAT: {
      char b[40];
      std::snprintf(b, sizeof b, "%.17g", sqlite3_column_double(s, col));
      return b;
    }
    case SQLITE_TEXT: {
      std::string out = "'";
      for (char c : column_string(s, col)) out += c == '\'' ? std::string("''") : std::string(1, c);
      return out + "'";
    }
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(s, col));
      const int n = sqlite3_column_bytes(s, col);
      std::string out = "X'";
      for (int i = 0; p && i < n; ++i) (out += kHex[p[i] >> 4]) += kHex[p[i] & 15];
      return out + "'";
    }
  }
}

}  // namespace

Store::Store(const std::string& path, bool full_sync) {
  for (const auto& f : {path, path + "-wal", path + "-shm"}) check_db_file(f);
  wal_lost_ = lost_wal(path);  // before SQLite rebuilds the index from what is left
  const std::string real = resolve_directory(path);
  if (sqlite3_open_v2(real.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_NOFOLLOW,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    if (db_ && sqlite3_extended_errcode(db_) == SQLITE_CANTOPEN_SYMLINK) msg = "it is a symbolic link";
    const bool full = db_ && disk_full(db_);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw StoreError(one_line(path + ": cannot open database: " + msg), full);
  }
  try {
    sqlite3_busy_timeout(db_, 5000);
    exec("PRAGMA journal_mode=WAL", "set journal mode");
    exec(full_sync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", "set synchronous");
    exec("PRAGMA foreign_keys=ON", "set foreign keys");
    open_schema(path);
    {
      // New jobs queue after every job; when a damaged page keeps the whole table from
      // being read, after the unfinished ones (through the state index) is enough.
      Stmt st{prepare("SELECT COALESCE(MAX(queue_seq), 0) FROM jobs")};
      if (sqlite3_step(st.s) == SQLITE_ROW) {
        next_seq_ = sqlite3_column_int64(st.s, 0) + 1;
      } else {
        Stmt un{prepare("SELECT COALESCE(MAX(queue_seq), 0) FROM jobs WHERE state IN ('queued', 'running')")};
        if (sqlite3_step(un.s) != SQLITE_ROW) fail("read queue positions");
        next_seq_ = sqlite3_column_int64(un.s, 0) + 1;
      }
    }
    // A quarantined job keeps its id: it is never given to another job.
    JobId set_aside = 0;
    {
      Stmt st{prepare("SELECT COALESCE(MAX(id), 0) FROM quarantine")};
      if (sqlite3_step(st.s) != SQLITE_ROW) fail("read quarantine");
      set_aside = sqlite3_column_int64(st.s, 0);
    }
    reserve_ids_above(set_aside);
    if (sqlite3_open_v2(real.c_str(), &rdb_, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_NOFOLLOW,
                        nullptr) != SQLITE_OK) {
      const std::string msg = rdb_ ? sqlite3_errmsg(rdb_) : "out of memory";
      throw StoreError(one_line(path + ": cannot open database for reading: " + msg));
    }
    sqlite3_busy_timeout(rdb_, 5000);
  } catch (...) {
    for (auto& [key, s] : statements_) sqlite3_finalize(s);
    statements_.clear();
    sqlite3_close_v2(rdb_);
    sqlite3_close_v2(db_);
    rdb_ = db_ = nullptr;
    throw;
  }
}

Store::~Store() {
  for (auto& [key, s] : statements_) sqlite3_finalize(s);
  sqlite3_close_v2(rdb_);
  sqlite3_close_v2(db_);
}

// The layout's version (store/schema.h): creates a new database's tables, migrates an
// older one, refuses a newer one. One transaction: a failed migration leaves the file
// as it was.
void Store::open_schema(const std::string& path) {
  begin();
  try {
    int version = 0;  // a new, empty database
    {
      Stmt st{prepare("SELECT "
                      "(SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'), "
                      "(SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobs')")};
      if (sqlite3_step(st.s) != SQLITE_ROW) fail("read the schema");
      const bool has_meta = sqlite3_column_int64(st.s, 0) > 0, has_jobs = sqlite3_column_int64(st.s, 1) > 0;
      if (has_jobs) version = 1;  // schema 1 wrote meta from its start; a database without it is older still
      if (has_meta) {
        Stmt m{prepare("SELECT value FROM meta WHERE key = 'schema'")};
        const int rc = sqlite3_step(m.s);
        if (rc == SQLITE_ROW) {
          const std::string v = column_string(m.s, 0);
          char* end = nullptr;
          errno = 0;
          const long n = std::strtol(v.c_str(), &end, 10);
          if (v.empty() || *end || errno || n < 1 || n > 1000000)
            throw StoreError(one_line(path + ": unknown database schema '" + v.substr(0, 40) +
                                      "' (table meta): refusing to use it"));
          version = static_cast<int>(n);
        } else if (rc != SQLITE_DONE) {
          fail("read the schema version");
        }
      }
    }
    if (version > kSchemaVersion)
      throw StoreError(path + ": database schema " + std::to_string(version) + " is newer than this aegisd knows (" +
                       std::to_string(kSchemaVersion) + "): written by a newer aegisd; refusing to use it");
    if (version == 1) migrate_from_1();
    exec(store_schema::kCreateTables, "create tables");
    add_later_columns();
    if (version != 0 && version < 4) fill_signatures(version);
    exec(store_schema::kCreateSignatureIndex, "create the signature index");  // after: one sort, not a write per job
    if (version != kSchemaVersion)
      exec("INSERT OR REPLACE INTO meta(key, value) VALUES('schema', '4')", "record the schema version");
    static_assert(kSchemaVersion == 4, "the line above writes the version");
    commit();
  } catch (...) {
    rollback();
    throw;
  }
}

// Columns added to schema 2 without a version change (store/schema.h): history_runs'
// activity and jobs' prediction, added to an older table inside open_schema's transaction;
// the rows already there get NULL (or the column's DEFAULT): nothing was measured or made.
void Store::add_later_columns() {
  auto add = [&](const char* table, const char* column, const std::string& declaration) {
    Stmt st{prepare("SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2")};
    check(sqlite3_bind_text(st.s, 1, table, -1, SQLITE_STATIC), "read a table's columns");
    check(sqlite3_bind_text(st.s, 2, column, -1, SQLITE_STATIC), "read a table's columns");
    if (sqlite3_step(st.s) != SQLITE_ROW) fail(std::string("read ") + table + "'s columns");
    if (sqlite3_column_int64(st.s, 0) > 0) return;
    const std::string sql = std::string("ALTER TABLE ") + table + " ADD COLUMN " + column + " " + declaration;
    exec(sql.c_str(), "add a column to an older table");
  };
  for (const char* column : store_schema::kHistoryActivityColumns)
    add("history_runs", column,
        std::string("REAL CHECK (") + column + " IS NULL OR (" + column + " >= 0 AND " + column + " <= 1))");
  for (const auto& [column, declaration] : store_schema::kJobPredictionColumns) add("jobs", column, declaration);
  for (const auto& [column, declaration] : store_schema::kJobLabColumns) add("jobs", column, declaration);
  add("jobs", store_schema::kJobSignatureColumn[0], store_schema::kJobSignatureColumn[1]);  // schema 4
}

// Schema 3 -> 4 (store/schema.h), inside open_schema's transaction: every job without a
// signature gets the one its stored fields make, as aegisd makes it for a new job.
void Store::fill_signatures(int from_version) {
  try {
    struct Fields {
      JobId id;
      std::int64_t uid;
      std::string workdir;
      int gpus;
    };
    std::vector<Fields> jobs;  // read first: the rows are then changed
    {
      Stmt st{prepare("SELECT id, uid, workdir, gpus FROM jobs WHERE signature = ''")};
      int rc;
      while ((rc = sqlite3_step(st.s)) == SQLITE_ROW)
        jobs.push_back({sqlite3_column_int64(st.s, 0), sqlite3_column_int64(st.s, 1), column_string(st.s, 2),
                        static_cast<int>(sqlite3_column_int64(st.s, 3))});
      if (rc != SQLITE_DONE) fail("read jobs");
    }
    Stmt args{prepare("SELECT arg FROM job_args WHERE job_id = ?1 ORDER BY pos")};
    Stmt tags{prepare("SELECT tag FROM job_tags WHERE job_id = ?1 ORDER BY pos")};
    Stmt set{prepare("UPDATE jobs SET signature = ?2 WHERE id = ?1")};
    std::vector<std::string> command, tag_list;
    for (const Fields& j : jobs) {
      job_strings(args.s, j.id, command);
      job_strings(tags.s, j.id, tag_list);
      const std::string signature = signature_of(j.uid, command, j.workdir, j.gpus, tag_list);
      sqlite3_reset(set.s);
      check(sqlite3_bind_int64(set.s, 1, j.id), "write a signature");
      check(sqlite3_bind_text(set.s, 2, signature.data(), static_cast<int>(signature.size()), SQLITE_STATIC),
            "write a signature");
      step_done(set.s, "write a signature");
    }
  } catch (const StoreError& e) {
    std::string_view why = e.what();
    if (why.starts_with("database: ")) why.remove_prefix(10);
    throw StoreError(one_line("database: migrate schema " + std::to_string(from_version) + " to 4: " +
                              std::string(why) + " (the database is left as it was)"),
                     e.disk_full);
  }
}

void Store::job_strings(sqlite3_stmt* s, JobId id, std::vector<std::string>& out) {
  sqlite3_reset(s);
  check(sqlite3_bind_int64(s, 1, id), "select a job's strings");
  out.clear();
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(column_string(s, 0));
  if (rc != SQLITE_DONE) fail("select a job's strings");
}

// Schema 4: with the job's argv and tags, the signature they make (and its uid, working
// directory and GPU count, which never change after submission).
void Store::write_signature(JobId id, const DaemonJob& job) {
  const std::string signature = signature_of(job);
  if (signature.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw StoreError("database: job " + std::to_string(id) + ": a text too long to store");
  sqlite3_stmt* s = cached(db_, "UPDATE jobs SET signature = ?2 WHERE id = ?1");
  Use use{s};
  check(sqlite3_bind_int64(s, 1, id), "write a signature");
  check(sqlite3_bind_text(s, 2, signature.data(), static_cast<int>(signature.size()), SQLITE_STATIC),
        "write a signature");
  step_done(s, "write a signature");
}

// Schema 1 -> 2 (store/schema.h), inside open_schema's transaction.
void Store::migrate_from_1() {
  try {
    exec("DROP INDEX IF EXISTS jobs_state", "drop the old index");
    exec("ALTER TABLE jobs RENAME TO jobs_v1", "rename the old table");
    exec(store_schema::kCreateTables, "create tables");
    JobId old_sequence = 0;
    {
      Stmt st{prepare("SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'jobs_v1'")};
      if (sqlite3_step(st.s) != SQLITE_ROW) fail("read the id sequence");
      old_sequence = sqlite3_column_int64(st.s, 0);
    }
    const double now = wall_now();
    {
      Stmt st{prepare("SELECT id, data FROM jobs_v1 ORDER BY id")};
      int rc;
      while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
        const JobId id = sqlite3_column_int64(st.s, 0);
        std::string error;
        if (auto job = read_v1_record(st.s, 1, id, error)) {
          try {
            write(*job, Write::InsertWithId);
            continue;
          } catch (const StoreError& e) {
            // Not storable as schema 2 (a value out of range): set aside as unreadable.
            // A full disk or a lost transaction ends the migration.
            if (e.disk_full || !in_transaction()) throw;
            error = std::string("job record: cannot be stored: ") + e.what();
          }
        }
        migration_quarantined_.push_back({id, error});
        sqlite3_stmt* q = cached(db_,
                                 "INSERT OR REPLACE INTO quarantine(id, uid, state, data, reason, t) "
                                 "SELECT id, uid, state, data, ?2, ?3 FROM jobs_v1 WHERE id = ?1");
        Use use{q};
        check(sqlite3_bind_int64(q, 1, id), "quarantine");
        check(sqlite3_bind_text(q, 2, error.data(), static_cast<int>(error.size()), SQLITE_STATIC), "quarantine");
        check(sqlite3_bind_double(q, 3, now), "quarantine");
        step_done(q, "quarantine");
      }
      if (rc != SQLITE_DONE) fail("read jobs");
    }
    set_id_sequence_at_least(old_sequence);
    exec("DROP TABLE jobs_v1", "drop the old table");
  } catch (const StoreError& e) {
    std::string_view why = e.what();
    if (why.starts_with("database: ")) why.remove_prefix(10);
    throw StoreError(one_line("database: migrate schema 1 to 2: " + std::string(why) +
                              " (the database is left as it was)"),
                     e.disk_full);
  }
}

void Store::fail(const std::string& what, sqlite3* db) {
  if (!db) db = db_;
  // Whatever the write connection was doing may be undone (by SQLite or the caller).
  if (db == db_) lists_written_.clear();
  last_error_full_ = disk_full(db);
  throw StoreError(one_line("database: " + what + ": " + sqlite3_errmsg(db)), last_error_full_);
}

void Store::check(int rc, const char* what, sqlite3* db) {
  if (rc != SQLITE_OK) fail(what, db);
}

void Store::step_done(sqlite3_stmt* s, const char* what, sqlite3* db) {
  if (sqlite3_step(s) != SQLITE_DONE) fail(what, db);
}

void Store::exec(const char* sql_text, const char* what) {
  if (sqlite3_exec(db_, sql_text, nullptr, nullptr, nullptr) != SQLITE_OK) fail(what);
}

sqlite3_stmt* Store::prepare(sqlite3* db, const char* sql_text) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql_text, -1, &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    fail("prepare", db);
  }
  return s;
}

sqlite3_stmt* Store::cached(sqlite3* db, const char* sql_text) {
  const auto key = std::make_pair(db, sql_text);
  if (auto it = statements_.find(key); it != statements_.end()) return it->second;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db, sql_text, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    fail("prepare", db);
  }
  statements_.emplace(key, s);
  return s;
}

void Store::begin() { exec("BEGIN IMMEDIATE", "begin transaction"); }

void Store::commit() {
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK) return;
  last_error_full_ = disk_full(db_);
  StoreError e(one_line(std::string("database: commit: ") + sqlite3_errmsg(db_)), last_error_full_);
  rollback();  // nothing of it landed: leave no transaction open
  throw e;
}

void Store::rollback() noexcept {
  lists_written_.clear();  // what was written in the transaction is gone
  // SQLite rolls a transaction back by itself after some errors (SQLITE_FULL, I/O);
  // ROLLBACK would then fail ("no transaction is active"). Called from destructors.
  if (!db_ || sqlite3_get_autocommit(db_) != 0) return;
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

bool Store::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

std::int64_t Store::next_queue_seq() { return next_seq_++; }

// AUTOINCREMENT gives max(seq, largest id) + 1.
void Store::set_id_sequence_at_least(JobId floor) {
  if (floor <= 0) return;
  std::optional<std::int64_t> seq;
  {
    Stmt st{prepare("SELECT MAX(seq) FROM sqlite_sequence WHERE name = 'jobs'")};
    const int rc = sqlite3_step(st.s);
    if (rc != SQLITE_ROW) fail("read id sequence");
    if (sqlite3_column_type(st.s, 0) != SQLITE_NULL) seq = sqlite3_column_int64(st.s, 0);
  }
  if (seq && *seq >= floor) return;
  Stmt st{prepare(seq ? "UPDATE sqlite_sequence SET seq = ? WHERE name = 'jobs'"
                      : "INSERT INTO sqlite_sequence(seq, name) VALUES(?, 'jobs')")};
  check(sqlite3_bind_int64(st.s, 1, floor), "reserve ids");
  step_done(st.s, "reserve ids");
}

void Store::reserve_ids_above(JobId floor) {
  if (floor <= 0) return;
  const bool own = !in_transaction();
  if (own) begin();
  try {
    set_id_sequence_at_least(floor);
    if (own) commit();
  } catch (...) {
    if (own) rollback();
    throw;
  }
}

void Store::insert(DaemonJob& job) {
  job.queue_seq = next_queue_seq();
  job.id = write(job, Write::Insert);
}

void Store::update(const DaemonJob& job) { write(job, Write::Update); }

// One job's rows, in a savepoint: all of them land, or none (and the caller's
// transaction, if any, goes on without them). Returns the job's id (a new one for
// Write::Insert), 0 when Write::Update finds no such job.
JobId Store::write(const DaemonJob& job, Write how) {
  const char* what = how == Write::Update ? "update job" : "insert job";
  const bool update = how == Write::Update;
  {
    sqlite3_stmt* sp = cached(db_, "SAVEPOINT job_write");
    Use use{sp};
    step_done(sp, what);
  }
  auto release = [&] {
    sqlite3_stmt* rel = cached(db_, "RELEASE job_write");
    Use use{rel};
    step_done(rel, what);
  };
  JobId id = job.id;
  try {
    const auto& r = job.request;
    {
      sqlite3_stmt* s = cached(db_, update ? sql().update_job.c_str() : sql().insert_job.c_str());
      Use use{s};
      const std::string_view state = to_string(job.state);
      const char* queue = job.state != JobState::Queued ? "" : job.in_recovery_queue ? "recovery" : "main";
      auto bind_int = [&](int col, std::int64_t v) { check(sqlite3_bind_int64(s, col + 1, v), what); };
      auto bind_real = [&](int col, double v) { check(sqlite3_bind_double(s, col + 1, v), what); };
      auto bind_null = [&](int col) { check(sqlite3_bind_null(s, col + 1), what); };
      auto bind_text = [&](int col, std::string_view v) {
        if (v.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
          throw StoreError("database: job " + std::to_string(job.id) + ": a text too long to store");
        check(sqlite3_bind_text(s, col + 1, v.data(), static_cast<int>(v.size()), SQLITE_STATIC), what);
      };
      auto bind_opt_int = [&](int col, auto v) { v ? bind_int(col, static_cast<std::int64_t>(*v)) : bind_null(col); };
      auto bind_opt_real = [&](int col, std::optional<double> v) { v ? bind_real(col, *v) : bind_null(col); };
      if (how == Write::Insert) bind_null(kId);
      else bind_int(kId, job.id);
      bind_int(kUid, job.uid);
      bind_int(kGid, job.gid);
      bind_text(kUser, job.user);
      bind_text(kState, state);
      bind_text(kQueue, queue);
      bind_int(kQueueSeq, job.queue_seq);
      bind_real(kSubmittedAt, job.submitted_at);
      bind_opt_real(kStartedAt, job.started_at);
      bind_opt_real(kEndedAt, job.ended_at);
      bind_int(kCancelRequested, job.cancel_requested);
      bind_text(kReason, job.reason);
      if (job.attached_to) {
        bind_int(kAttachedPid, job.attached_to->pid);
        bind_int(kAttachedStartTicks, static_cast<std::int64_t>(job.attached_to->start_ticks));  // the bits
      } else {
        bind_null(kAttachedPid);
        bind_null(kAttachedStartTicks);
      }
      bind_int(kRecoveryFloorMib, job.recovery.floor_mib);
      bind_int(kRecoveryExclusiveOnly, job.recovery.exclusive_only);
      bind_int(kRecoveryOomCount, job.recovery.oom_count);
      bind_text(kName, r.name);
      bind_text(kWorkdir, r.workdir);
      bind_int(kGpus, r.gpus);
      bind_opt_int(kMemMib, r.mem_mib);
      bind_opt_int(kProfiledMib, r.profiled_mib);
      bind_opt_int(kFaketensorMib, r.faketensor_mib);
      bind_int(kExclusive, r.exclusive);
      bind_int(kRestartable, r.restartable);
      bind_opt_real(kHintGpuUtil, r.hint_gpu_util);
      bind_opt_int(kHintSharingScore, r.hint_sharing_score);
      if (r.model) {
        bind_int(kModelDepth, r.model->depth);
        bind_real(kModelTotalActivations, r.model->total_activations);
        bind_real(kModelTotalParameters, r.model->total_parameters);
        bind_int(kModelBatchSize, r.model->batch_size);
        bind_int(kModelBatchnormLayers, r.model->batchnorm_layers);
        bind_int(kModelDropoutLayers, r.model->dropout_layers);
        bind_text(kModelActivation, r.model->activation);
      } else {
        for (int c = kModelDepth; c <= kModelActivation; ++c) bind_null(c);
      }
      bind_opt_real(kPredictedUtil, job.predicted_util);
      bind_text(kPredictedUtilSource, job.predicted_util ? std::string_view(job.predicted_util_source) : "");
      bind_opt_int(kTimeLimitS, r.time_limit_s);  // item 5
      bind_int(kPriority, r.priority);  // issue 32 item 1
      bind_int(kCheckpointSignal, r.checkpoint_signal);
      bind_real(kCheckpointLeadS, r.checkpoint_lead_s);
      bind_opt_int(kPreemptedFor, job.preempted_for);
      bind_real(kPreemptWarnedAt, job.preempt_warned_at);
      bind_real(kPreemptStopAt, job.preempt_stop_at);
      bind_int(kPreemptStopping, job.preempt_stopping);
      const std::string notify = api::to_string(r.notify);  // issue 32 item 6
      bind_text(kNotify, notify);
      step_done(s, what);
    }
    if (update && sqlite3_changes(db_) == 0) {  // not in the table (set aside): nothing to update
      release();
      return 0;
    }
    if (!update) id = sqlite3_last_insert_rowid(db_);
    const std::uint64_t digest = lists_digest(r);
    const auto known = lists_written_.find(id);
    if (!update || known == lists_written_.end() || known->second != digest) {
      write_request_lists(id, r, update);
      write_signature(id, job);
    }
    write_attempts(id, job.attempts, update);
    release();
    // Finished jobs are seldom written again: no need to remember them.
    if (is_final(job.state)) lists_written_.erase(id);
    else lists_written_[id] = digest;
    return id;
  } catch (...) {
    lists_written_.erase(id);
    // Undoes this job's rows only; nothing to undo when SQLite ended the transaction itself.
    if (in_transaction()) {
      sqlite3_exec(db_, "ROLLBACK TO job_write", nullptr, nullptr, nullptr);
      sqlite3_exec(db_, "RELEASE job_write", nullptr, nullptr, nullptr);
    }
    throw;
  }
}

// Issue 32: its array and dependencies (schema.h job_array, job_after), at submission
// only: they never change. An element 0 names its own id (not known before the insert).
void Store::write_links(JobId id, const DaemonJob& job) {
  const char* what = "write job links";
  if (job.array_id) {
    sqlite3_stmt* s = cached(db_, "INSERT INTO job_array(job_id, array_id, array_index, array_limit) VALUES(?1, ?2, ?3, ?4)");
    Use use{s};
    check(sqlite3_bind_int64(s, 1, id), what);
    check(sqlite3_bind_int64(s, 2, *job.array_id > 0 ? *job.array_id : id), what);
    check(sqlite3_bind_int64(s, 3, job.array_index), what);
    check(sqlite3_bind_int64(s, 4, job.array_limit), what);
    step_done(s, what);
  }
  sqlite3_stmt* s = cached(db_, "INSERT INTO job_after(job_id, pos, dep_id, kind) VALUES(?1, ?2, ?3, ?4)");
  for (std::size_t i = 0; i < job.after.size(); ++i) {
    Use use{s};
    check(sqlite3_bind_int64(s, 1, id), what);
    check(sqlite3_bind_int64(s, 2, static_cast<std::int64_t>(i)), what);
    check(sqlite3_bind_int64(s, 3, job.after[i].first), what);
    check(sqlite3_bind_text(s, 4, job.after[i].second.c_str(), -1, SQLITE_STATIC), what);
    step_done(s, what);
  }
}

std::vector<JobId> Store::array_elements(JobId array_id) {
  sqlite3_stmt* s = cached(db_, "SELECT job_id FROM job_array WHERE array_id = ?1 ORDER BY array_index");
  Use use{s};
  check(sqlite3_bind_int64(s, 1, array_id), "read an array");
  std::vector<JobId> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(sqlite3_column_int64(s, 0));
  if (rc != SQLITE_DONE) fail("read an array");
  return out;
}

// The request's lists: argv, environment, tags, the model's layer counts. `replace`:
// the job's old rows go first.
void Store::write_request_lists(JobId id, const api::JobRequest& r, bool replace) {
  const char* what = "write job lists";
  if (replace) {
    for (const char* del : {"DELETE FROM job_args WHERE job_id = ?1", "DELETE FROM job_env WHERE job_id = ?1",
                            "DELETE FROM job_tags WHERE job_id = ?1",
                            "DELETE FROM job_model_layers WHERE job_id = ?1"}) {
      sqlite3_stmt* s = cached(db_, del);
      Use use{s};
      check(sqlite3_bind_int64(s, 1, id), what);
      step_done(s, what);
    }
  }
  auto text = [&](sqlite3_stmt* s, int i, const std::string& v) {
    if (v.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw StoreError("database: job " + std::to_string(id) + ": a text too long to store");
    check(sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC), what);
  };
  auto positional = [&](const char* insert, const std::vector<std::string>& items) {
    sqlite3_stmt* s = cached(db_, insert);
    for (std::size_t i = 0; i < items.size(); ++i) {
      Use use{s};
      check(sqlite3_bind_int64(s, 1, id), what);
      check(sqlite3_bind_int64(s, 2, static_cast<std::int64_t>(i)), what);
      text(s, 3, items[i]);
      step_done(s, what);
    }
  };
  positional("INSERT INTO job_args(job_id, pos, arg) VALUES(?1, ?2, ?3)", r.command);
  positional("INSERT INTO job_tags(job_id, pos, tag) VALUES(?1, ?2, ?3)", r.tags);
  if (!r.env.empty()) {
    sqlite3_stmt* s = cached(db_, "INSERT INTO job_env(job_id, name, value) VALUES(?1, ?2, ?3)");
    for (const auto& [name, value] : r.env) {
      Use use{s};
      check(sqlite3_bind_int64(s, 1, id), what);
      text(s, 2, name);
      text(s, 3, value);
      step_done(s, what);
    }
  }
  if (r.model && !r.model->layer_counts.empty()) {
    sqlite3_stmt* s = cached(db_, "INSERT INTO job_model_layers(job_id, layer, count) VALUES(?1, ?2, ?3)");
    for (const auto& [layer, count] : r.model->layer_counts) {
      Use use{s};
      check(sqlite3_bind_int64(s, 1, id), what);
      text(s, 2, layer);
      check(sqlite3_bind_int64(s, 3, count), what);
      step_done(s, what);
    }
  }
}

// The attempts and their GPUs: each attempt's row is written over (or added), then what
// the job no longer has goes. Attempts are numbered 1, 2, ... (lifecycle); the rows of a
// job whose numbers are not that (never, in practice) are all rewritten.
void Store::write_attempts(JobId id, const std::vector<Attempt>& attempts, bool replace) {
  const char* what = "write attempts";
  bool numbered = true;
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    numbered = numbered && attempts[i].number == static_cast<int>(i + 1);
    if (attempts[i].number < 1 || (i > 0 && attempts[i].number <= attempts[i - 1].number))
      throw StoreError("database: job " + std::to_string(id) + ": attempt numbers out of order");
  }
  if (replace) {
    sqlite3_stmt* s = cached(db_, "DELETE FROM attempts WHERE job_id = ?1 AND number > ?2");
    Use use{s};
    check(sqlite3_bind_int64(s, 1, id), what);
    check(sqlite3_bind_int64(s, 2, numbered ? static_cast<std::int64_t>(attempts.size()) : 0), what);
    step_done(s, what);
  }
  sqlite3_stmt* up = cached(db_, sql().upsert_attempt.c_str());
  sqlite3_stmt* gpu = cached(db_,
                             "INSERT INTO attempt_gpus(job_id, number, pos, uuid) VALUES(?1, ?2, ?3, ?4) "
                             "ON CONFLICT(job_id, number, pos) DO UPDATE SET uuid = excluded.uuid "
                             "WHERE uuid IS NOT excluded.uuid");
  sqlite3_stmt* trim = cached(db_, "DELETE FROM attempt_gpus WHERE job_id = ?1 AND number = ?2 AND pos >= ?3");
  sqlite3_stmt* anchor = cached(db_,
                                "INSERT INTO attempt_anchors(job_id, number, context_at, anchor) VALUES(?1, ?2, ?3, ?4) "
                                "ON CONFLICT(job_id, number) DO UPDATE SET context_at = excluded.context_at, "
                                "anchor = excluded.anchor");
  for (const Attempt& a : attempts) {
    {
      Use use{up};
      auto bind_int = [&](int col, std::int64_t v) { check(sqlite3_bind_int64(up, col + 1, v), what); };
      auto bind_real = [&](int col, double v) { check(sqlite3_bind_double(up, col + 1, v), what); };
      auto bind_opt_real = [&](int col, std::optional<double> v) {
        v ? bind_real(col, *v) : check(sqlite3_bind_null(up, col + 1), what);
      };
      auto bind_opt_int = [&](int col, std::optional<int> v) {
        v ? bind_int(col, *v) : check(sqlite3_bind_null(up, col + 1), what);
      };
      bind_int(aJobId, id);
      bind_int(aNumber, a.number);
      bind_real(aLaunchedAt, a.launched_at);
      bind_opt_real(aFirstActivity, a.first_activity);
      bind_int(aExclusive, a.exclusive);
      bind_int(aAdmittedMib, a.admitted_mib);
      bind_int(aFreeAtPlacementMib, a.free_at_placement);
      bind_int(aGpuTotalMib, a.gpu_total_mib);
      bind_int(aPgid, a.pgid);
      bind_int(aShimPid, a.shim_pid);
      bind_int(aPeakMib, a.peak_mib);
      bind_opt_real(aEndedAt, a.ended_at);
      const std::string_view outcome = to_string(a.outcome);
      check(sqlite3_bind_text(up, aOutcome + 1, outcome.data(), static_cast<int>(outcome.size()), SQLITE_STATIC),
            what);
      check(sqlite3_bind_text(up, aDetail + 1, a.detail.data(), static_cast<int>(a.detail.size()), SQLITE_STATIC),
            what);
      bind_opt_int(aExitCode, a.exit_code);
      bind_opt_int(aSignal, a.signal);
      step_done(up, what);
    }
    for (std::size_t i = 0; i < a.gpu_uuids.size(); ++i) {
      Use use{gpu};
      const std::string& uuid = a.gpu_uuids[i];
      check(sqlite3_bind_int64(gpu, 1, id), what);
      check(sqlite3_bind_int64(gpu, 2, a.number), what);
      check(sqlite3_bind_int64(gpu, 3, static_cast<std::int64_t>(i)), what);
      check(sqlite3_bind_text(gpu, 4, uuid.data(), static_cast<int>(uuid.size()), SQLITE_STATIC), what);
      step_done(gpu, what);
    }
    if (a.context_at || !a.anchor.empty()) {
      Use use{anchor};
      check(sqlite3_bind_int64(anchor, 1, id), what);
      check(sqlite3_bind_int64(anchor, 2, a.number), what);
      check(a.context_at ? sqlite3_bind_double(anchor, 3, *a.context_at) : sqlite3_bind_null(anchor, 3), what);
      check(sqlite3_bind_text(anchor, 4, a.anchor.data(), static_cast<int>(a.anchor.size()), SQLITE_STATIC), what);
      step_done(anchor, what);
    }
    if (replace) {
      Use use{trim};
      check(sqlite3_bind_int64(trim, 1, id), what);
      check(sqlite3_bind_int64(trim, 2, a.number), what);
      check(sqlite3_bind_int64(trim, 3, static_cast<std::int64_t>(a.gpu_uuids.size())), what);
      step_done(trim, what);
    }
  }
}

void Store::event(JobId id, Seconds t, const std::string& kind, const std::string& detail) {
  sqlite3_stmt* s = cached(db_, "INSERT INTO events(job_id, t, kind, detail) VALUES(?1, ?2, ?3, ?4)");
  Use use{s};
  check(sqlite3_bind_int64(s, 1, id), "insert event");
  check(sqlite3_bind_double(s, 2, t), "insert event");
  check(sqlite3_bind_text(s, 3, kind.data(), static_cast<int>(kind.size()), SQLITE_STATIC), "insert event");
  check(sqlite3_bind_text(s, 4, detail.data(), static_cast<int>(detail.size()), SQLITE_STATIC), "insert event");
  step_done(s, "insert event");
}

std::optional<DaemonJob> Store::read_job(sqlite3* db, sqlite3_stmt* s, std::string& error) {
  error.clear();
  DaemonJob j;
  Row row(s, "jobs", error);
  j.id = row.integer(kId, "id", 1);
  const std::string why = "job " + std::to_string(j.id);
  j.uid = static_cast<uid_t>(row.integer(kUid, "uid", 0, std::numeric_limits<uid_t>::max()));
  j.gid = static_cast<gid_t>(row.integer(kGid, "gid", 0, std::numeric_limits<gid_t>::max()));
  j.user = row.text(kUser, "user");
  if (const std::string state = row.text(kState, "state"); row.ok()) {
    if (auto st = parse_job_state(state)) j.state = *st;
    else row.wrong("state", "unknown state '" + state.substr(0, 40) + "'");
  }
  const std::string queue = row.text(kQueue, "queue");
  if (row.ok() && (queue == "main" || queue == "recovery") != (j.state == JobState::Queued))
    row.wrong("queue", "'" + queue.substr(0, 40) + "' for a job that is " + std::string(to_string(j.state)));
  j.in_recovery_queue = queue == "recovery";
  j.queue_seq = row.integer(kQueueSeq, "queue_seq");
  j.submitted_at = row.real(kSubmittedAt, "submitted_at");
  j.started_at = row.opt_real(kStartedAt, "started_at");
  j.ended_at = row.opt_real(kEndedAt, "ended_at");
  j.cancel_requested = row.boolean(kCancelRequested, "cancel_requested");
  j.reason = row.text(kReason, "reason");
  const auto pid = row.opt_integer(kAttachedPid, "attached_pid", 1, std::numeric_limits<pid_t>::max());
  const auto ticks = row.opt_integer(kAttachedStartTicks, "attached_start_ticks");
  if (pid.has_value() != ticks.has_value()) row.wrong("attached_start_ticks", "given without attached_pid, or missing");
  if (pid && ticks) j.attached_to = ClientProcess{static_cast<pid_t>(*pid), static_cast<std::uint64_t>(*ticks)};
  j.recovery.floor_mib = row.integer(kRecoveryFloorMib, "recovery_floor_mib", 0);
  j.recovery.exclusive_only = row.boolean(kRecoveryExclusiveOnly, "recovery_exclusive_only");
  j.recovery.oom_count = row.int32(kRecoveryOomCount, "recovery_oom_count", 0);
  auto& r = j.request;
  r.name = row.text(kName, "name");
  r.workdir = row.text(kWorkdir, "workdir");
  r.gpus = row.int32(kGpus, "gpus");
  r.mem_mib = row.opt_integer(kMemMib, "mem_mib");
  r.profiled_mib = row.opt_integer(kProfiledMib, "profiled_mib");
  r.faketensor_mib = row.opt_integer(kFaketensorMib, "faketensor_mib");
  r.exclusive = row.boolean(kExclusive, "exclusive");
  r.restartable = row.boolean(kRestartable, "restartable");
  r.hint_gpu_util = row.opt_real(kHintGpuUtil, "hint_gpu_util");
  r.hint_sharing_score = row.opt_int32(kHintSharingScore, "hint_sharing_score");
  if (sqlite3_column_type(s, kModelDepth) != SQLITE_NULL) {
    ModelFeatures f;
    f.depth = row.int32(kModelDepth, "model_depth", 1);
    f.total_activations = row.real(kModelTotalActivations, "model_total_activations");
    f.total_parameters = row.real(kModelTotalParameters, "model_total_parameters");
    f.batch_size = row.int32(kModelBatchSize, "model_batch_size", 1);
    f.batchnorm_layers = row.int32(kModelBatchnormLayers, "model_batchnorm_layers", 0);
    f.dropout_layers = row.int32(kModelDropoutLayers, "model_dropout_layers", 0);
    f.activation = row.text(kModelActivation, "model_activation");
    if (row.ok() && (f.total_activations < 0 || f.total_parameters < 0 || f.activation.empty()))
      row.wrong("model_total_activations", "model features out of range");
    r.model = std::move(f);
  } else {
    for (int c = kModelTotalActivations; c <= kModelActivation; ++c)
      if (row.ok() && sqlite3_column_type(s, c) != SQLITE_NULL)
        row.wrong(kJobColumns[static_cast<std::size_t>(c)], "set without model_depth");
  }
  r.time_limit_s = row.opt_integer(kTimeLimitS, "time_limit_s");  // item 5
  if (row.ok() && r.time_limit_s && *r.time_limit_s < 1) row.wrong("time_limit_s", "below 1");
  j.predicted_util = row.opt_real(kPredictedUtil, "predicted_util");
  j.predicted_util_source = row.text(kPredictedUtilSource, "predicted_util_source");
  if (row.ok() && j.predicted_util.has_value() == j.predicted_util_source.empty())
    row.wrong("predicted_util_source", "'" + j.predicted_util_source.substr(0, 40) + "' with predicted_util " +
                                           (j.predicted_util ? "set" : "NULL"));
  if (row.ok() && j.predicted_util && !(*j.predicted_util >= 0 && *j.predicted_util <= 1))
    row.wrong("predicted_util", "outside [0, 1]");
  r.priority = row.int32(kPriority, "priority", api::kMinPriority, api::kMaxPriority);  // issue 32 item 1
  r.checkpoint_signal = row.int32(kCheckpointSignal, "checkpoint_signal", 0, 64);
  r.checkpoint_lead_s = row.real(kCheckpointLeadS, "checkpoint_lead_s");
  j.preempted_for = row.opt_integer(kPreemptedFor, "preempted_for", 1);
  j.preempt_warned_at = row.real(kPreemptWarnedAt, "preempt_warned_at");
  j.preempt_stop_at = row.real(kPreemptStopAt, "preempt_stop_at");
  j.preempt_stopping = row.boolean(kPreemptStopping, "preempt_stopping");
  {  // issue 32 item 6
    const std::string notify = row.text(kNotify, "notify");
    auto parsed = api::parse_notify(notify);
    if (auto* set = std::get_if<api::NotifySet>(&parsed)) r.notify = *set;
    else if (row.ok()) row.wrong("notify", std::get<std::string>(parsed));
  }
  if (!row.ok()) return std::nullopt;

  // The child rows, read on the same connection while `s` is on its row: one snapshot.
  auto children = [&](const char* sql_text, auto&& each) {
    if (!error.empty()) return;
    sqlite3_stmt* c = cached(db, sql_text);
    Use use{c};
    check(sqlite3_bind_int64(c, 1, j.id), "select job rows", db);
    int rc = SQLITE_DONE;
    while (error.empty() && (rc = sqlite3_step(c)) == SQLITE_ROW) each(c);
    if (error.empty() && rc != SQLITE_DONE) fail("select " + why + "'s rows", db);
  };
  auto arg = [&](sqlite3_stmt* c) {
    Row a(c, "job_args", error);
    if (a.integer(0, "pos") != static_cast<std::int64_t>(r.command.size())) a.wrong("pos", "not in sequence");
    r.command.push_back(a.text(1, "arg"));
  };
  if (listing_bytes_ == 0) {
    children("SELECT pos, arg FROM job_args WHERE job_id = ?1 ORDER BY pos", arg);
    children("SELECT name, value FROM job_env WHERE job_id = ?1 ORDER BY name", [&](sqlite3_stmt* c) {
      Row e(c, "job_env", error);
      std::string name = e.text(0, "name");
      r.env.emplace_hint(r.env.end(), std::move(name), e.text(1, "value"));
    });
  } else if (error.empty() && listing_argv_) {  // a listing's (list_page): the argv's first characters, no environment
    sqlite3_stmt* c = cached(db, "SELECT pos, substr(arg, 1, ?2) FROM job_args WHERE job_id = ?1 ORDER BY pos");
    Use use{c};
    check(sqlite3_bind_int64(c, 1, j.id), "select job rows", db);
    check(sqlite3_bind_int64(c, 2, static_cast<std::int64_t>(listing_bytes_) + 1), "select job rows", db);
    int rc = SQLITE_DONE;
    while (error.empty() && (rc = sqlite3_step(c)) == SQLITE_ROW) arg(c);
    if (error.empty() && rc != SQLITE_DONE) fail("select " + why + "'s rows", db);
  }
  children("SELECT pos, tag FROM job_tags WHERE job_id = ?1 ORDER BY pos", [&](sqlite3_stmt* c) {
    Row t(c, "job_tags", error);
    if (t.integer(0, "pos") != static_cast<std::int64_t>(r.tags.size())) t.wrong("pos", "not in sequence");
    r.tags.push_back(t.text(1, "tag"));
  });
  children("SELECT layer, count FROM job_model_layers WHERE job_id = ?1 ORDER BY layer", [&](sqlite3_stmt* c) {
    Row l(c, "job_model_layers", error);
    if (!r.model) l.wrong("layer", "layer counts of a job without model features");
    std::string layer = l.text(0, "layer");
    const int count = l.int32(1, "count", 0);
    if (l.ok() && layer.empty()) l.wrong("layer", "empty");
    if (l.ok()) r.model->layer_counts.emplace_hint(r.model->layer_counts.end(), std::move(layer), count);
  });
  children("SELECT array_id, array_index, array_limit FROM job_array WHERE job_id = ?1", [&](sqlite3_stmt* c) {
    Row a(c, "job_array", error);
    j.array_id = a.integer(0, "array_id", 1);
    j.array_index = a.int32(1, "array_index", 0);
    j.array_limit = a.int32(2, "array_limit", 0);
  });
  children("SELECT pos, dep_id, kind FROM job_after WHERE job_id = ?1 ORDER BY pos", [&](sqlite3_stmt* c) {
    Row a(c, "job_after", error);
    if (a.integer(0, "pos") != static_cast<std::int64_t>(j.after.size())) a.wrong("pos", "not in sequence");
    j.after.emplace_back(a.integer(1, "dep_id", 1), a.text(2, "kind"));
  });
  children(sql().select_attempts.c_str(), [&](sqlite3_stmt* c) {
    Row row_a(c, "attempts", error);
    Attempt a;
    a.number = row_a.int32(aNumber, "number", 1);
    if (row_a.ok() && !j.attempts.empty() && a.number <= j.attempts.back().number)
      row_a.wrong("number", "out of order");
    a.launched_at = row_a.real(aLaunchedAt, "launched_at");
    a.first_activity = row_a.opt_real(aFirstActivity, "first_activity");
    a.exclusive = row_a.boolean(aExclusive, "exclusive");
    a.admitted_mib = row_a.integer(aAdmittedMib, "admitted_mib");
    a.free_at_placement = row_a.integer(aFreeAtPlacementMib, "free_at_placement_mib");
    a.gpu_total_mib = row_a.integer(aGpuTotalMib, "gpu_total_mib");
    a.pgid = static_cast<pid_t>(row_a.integer(aPgid, "pgid", 0, std::numeric_limits<pid_t>::max()));
    a.shim_pid = static_cast<pid_t>(row_a.integer(aShimPid, "shim_pid", 0, std::numeric_limits<pid_t>::max()));
    a.peak_mib = row_a.integer(aPeakMib, "peak_mib");
    a.ended_at = row_a.opt_real(aEndedAt, "ended_at");
    if (const std::string outcome = row_a.text(aOutcome, "outcome"); row_a.ok()) {
      if (auto o = parse_attempt_outcome(outcome)) a.outcome = *o;
      else row_a.wrong("outcome", "unknown outcome '" + outcome.substr(0, 40) + "'");
    }
    a.detail = row_a.text(aDetail, "detail");
    a.exit_code = row_a.opt_int32(aExitCode, "exit_code", 0, 255);
    a.signal = row_a.opt_int32(aSignal, "signal", 1, 127);
    j.attempts.push_back(std::move(a));
  });
  if (!j.attempts.empty()) {
    children("SELECT number, pos, uuid FROM attempt_gpus WHERE job_id = ?1 ORDER BY number, pos",
             [&](sqlite3_stmt* c) {
               Row g(c, "attempt_gpus", error);
               const auto number = g.integer(0, "number");
               const auto pos = g.integer(1, "pos");
               std::string uuid = g.text(2, "uuid");
               if (!g.ok()) return;
               auto it = std::find_if(j.attempts.begin(), j.attempts.end(),
                                      [&](const Attempt& a) { return a.number == number; });
               if (it == j.attempts.end()) return g.wrong("number", "no such attempt");
               if (pos != static_cast<std::int64_t>(it->gpu_uuids.size())) return g.wrong("pos", "not in sequence");
               it->gpu_uuids.push_back(std::move(uuid));
             });
    children("SELECT number, context_at, anchor FROM attempt_anchors WHERE job_id = ?1", [&](sqlite3_stmt* c) {
      Row g(c, "attempt_anchors", error);
      const auto number = g.integer(0, "number");
      const auto context_at = g.opt_real(1, "context_at");
      std::string anchor = g.text(2, "anchor");
      if (!g.ok()) return;
      auto it = std::find_if(j.attempts.begin(), j.attempts.end(), [&](const Attempt& a) { return a.number == number; });
      if (it == j.attempts.end()) return g.wrong("number", "no such attempt");
      it->context_at = context_at;
      it->anchor = std::move(anchor);
    });
  }
  // What the API accepted once, it must accept still: a damaged row is not run.
  if (error.empty() && listing_argv_)
    if (auto bad = api::validate(r)) error = "request: " + bad->message;
  if (error.empty()) return j;
  // One line, of bounded length: it goes into logs.
  error = one_line(std::move(error));
  if (error.size() > 300) error = error.substr(0, 300) + "...";
  return std::nullopt;
}

std::optional<DaemonJob> Store::get(JobId id) {
  const std::string job = "job " + std::to_string(id);
  {
    sqlite3_stmt* st = cached(rdb_, sql().select_job.c_str());
    Use use{st};
    check(sqlite3_bind_int64(st, 1, id), "select job", rdb_);
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      std::string error;
      if (auto j = read_job(rdb_, st, error)) return j;
      // Not the reader's words: they may quote the record, and anyone may ask.
      last_error_full_ = false;
      throw StoreError("database: " + job + ": its record is damaged and cannot be read");
    }
    if (rc != SQLITE_DONE) fail("select " + job, rdb_);
  }
  sqlite3_stmt* st = cached(rdb_, "SELECT 1 FROM quarantine WHERE id = ?1");
  Use use{st};
  check(sqlite3_bind_int64(st, 1, id), "select quarantine", rdb_);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    last_error_full_ = false;
    throw StoreError("database: " + job + ": its record is damaged and was set aside (table quarantine)");
  }
  if (rc != SQLITE_DONE) fail("select quarantine", rdb_);
  return std::nullopt;
}

// The job's rows as text, one line per row ("jobs: id=4 uid=1000 ..."), for the
// quarantine: what an administrator needs to see what was wrong, or to put it back.
std::string Store::copy_of_rows(JobId id) {
  std::string out;
  try {
    for (const char* table : store_schema::kJobTables) {
      const std::string q = std::string("SELECT * FROM ") + table +
                            (table == std::string_view("jobs") ? " WHERE id = ?1" : " WHERE job_id = ?1");
      Stmt st{prepare(q.c_str())};
      check(sqlite3_bind_int64(st.s, 1, id), "copy rows");
      int rc;
      while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
        out += table;
        out += ":";
        for (int c = 0; c < sqlite3_column_count(st.s); ++c) {
          out += ' ';
          out += sqlite3_column_name(st.s, c);
          out += '=';
          out += sql_literal(st.s, c);
        }
        out += '\n';
      }
      if (rc != SQLITE_DONE) fail(std::string("copy rows of ") + table);
    }
  } catch (const StoreError& e) {
    out += std::string("(the rest could not be read: ") + e.what() + ")\n";
  }
  return out;
}

void Store::quarantine(const Quarantined& q) {
  // Moved in one go: the rows leave `jobs` (and its child tables) only if they land in
  // `quarantine`.
  const bool outer = in_transaction();
  const std::string copy = copy_of_rows(q.id);
  exec("SAVEPOINT quarantine", "quarantine");
  try {
    {
      Stmt st{prepare("INSERT OR REPLACE INTO quarantine(id, uid, state, data, reason, t) "
                      "SELECT id, uid, state, ?, ?, ? FROM jobs WHERE id = ?")};
      check(sqlite3_bind_text(st.s, 1, copy.data(), static_cast<int>(copy.size()), SQLITE_STATIC), "quarantine");
      check(sqlite3_bind_text(st.s, 2, q.reason.c_str(), static_cast<int>(q.reason.size()), SQLITE_TRANSIENT),
            "quarantine");
      check(sqlite3_bind_double(st.s, 3, wall_now()), "quarantine");
      check(sqlite3_bind_int64(st.s, 4, q.id), "quarantine");
      if (sqlite3_step(st.s) != SQLITE_DONE) fail("quarantine job " + std::to_string(q.id));
    }
    {
      Stmt st{prepare("DELETE FROM jobs WHERE id = ?")};
      check(sqlite3_bind_int64(st.s, 1, q.id), "quarantine");
      if (sqlite3_step(st.s) != SQLITE_DONE) fail("quarantine job " + std::to_string(q.id));
    }
    exec("RELEASE quarantine", "quarantine");
    lists_written_.erase(q.id);
  } catch (...) {
    if (outer) {
      sqlite3_exec(db_, "ROLLBACK TO quarantine", nullptr, nullptr, nullptr);
      sqlite3_exec(db_, "RELEASE quarantine", nullptr, nullptr, nullptr);
    } else {
      rollback();
    }
    throw;
  }
}

std::vector<DaemonJob> Store::unfinished() {
  // The first call also reports what the migration set aside (the daemon logs it).
  quarantined_ = std::move(migration_quarantined_);
  migration_quarantined_.clear();
  const std::size_t moved = quarantined_.size();
  std::vector<DaemonJob> out;
  {
    sqlite3_stmt* st = cached(db_, sql().select_unfinished.c_str());
    Use use{st};
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      std::string error;
      if (auto j = read_job(db_, st, error)) {
        next_seq_ = std::max(next_seq_, j->queue_seq + 1);
        lists_written_[j->id] = lists_digest(j->request);
        out.push_back(std::move(*j));
      } else {
        quarantined_.push_back({sqlite3_column_int64(st, kId), error});
      }
    }
    if (rc != SQLITE_DONE) fail("select unfinished jobs");
  }
  for (std::size_t i = moved; i < quarantined_.size(); ++i) {
    auto& q = quarantined_[i];
    try {
      quarantine(q);
    } catch (const StoreError& e) {
      // Left where it is (and not loaded): reported again at the next start.
      q.reason += std::string(" (could not be moved: ") + e.what() + ")";
    }
  }
  return out;
}

// The rows of a listing's statement (the columns of `jobs`): the jobs read; rows that
// cannot be read are skipped and counted, an error reading the tables throws.
std::vector<DaemonJob> Store::listed(sqlite3_stmt* s) {
  std::vector<DaemonJob> out;
  int rc;
  std::string error;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (auto j = read_job(rdb_, s, error)) out.push_back(std::move(*j));
    else ++list_skipped_;
  }
  if (rc != SQLITE_DONE) fail("select jobs", rdb_);
  return out;
}

std::vector<DaemonJob> Store::list(bool all, std::int64_t limit) {
  list_skipped_ = 0;
  sqlite3_stmt* st = cached(rdb_, all ? sql().select_all_limit.c_str() : sql().select_unfinished_limit.c_str());
  Use use{st};
  check(sqlite3_bind_int64(st, 1, limit), "select jobs", rdb_);
  return listed(st);
}

std::vector<DaemonJob> Store::list_page(JobId before, std::int64_t limit, std::optional<uid_t> uid,
                                        std::size_t listing_bytes, bool argv) {
  list_skipped_ = 0;
  struct Reset {
    std::size_t& v;
    bool& argv;
    ~Reset() { v = 0, argv = true; }
  } reset{listing_bytes_, listing_argv_};
  listing_bytes_ = listing_bytes;
  listing_argv_ = argv || listing_bytes == 0;
  sqlite3_stmt* st = cached(rdb_, uid ? sql().select_page_uid.c_str() : sql().select_page.c_str());
  Use use{st};
  int n = 1;
  check(sqlite3_bind_int64(st, n++, before > 0 ? before : std::numeric_limits<JobId>::max()), "select jobs", rdb_);
  if (uid) check(sqlite3_bind_int64(st, n++, *uid), "select jobs", rdb_);
  check(sqlite3_bind_int64(st, n, limit), "select jobs", rdb_);
  return listed(st);
}

JobId Store::next_id() {
  sqlite3_stmt* st = cached(db_,
                            "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0), "
                            "COALESCE((SELECT MAX(id) FROM jobs), 0)");
  Use use{st};
  if (sqlite3_step(st) != SQLITE_ROW) fail("next id");
  return std::max(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1)) + 1;
}

std::vector<Store::Event> Store::events(JobId id) {
  sqlite3_stmt* st = cached(rdb_, "SELECT t, kind, detail FROM events WHERE job_id = ?1 ORDER BY id");
  Use use{st};
  check(sqlite3_bind_int64(st, 1, id), "select events", rdb_);
  std::vector<Event> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    out.push_back({id, sqlite3_column_double(st, 0), column_string(st, 1), column_string(st, 2)});
  if (rc != SQLITE_DONE) fail("select events", rdb_);
  return out;
}

void Store::record_peak(const std::string& signature, MiB peak_mib, Seconds t) {
  sqlite3_stmt* st = cached(db_,
                            "INSERT INTO history(signature, peak_mib, runs, updated_at) VALUES(?1, ?2, 1, ?3) "
                            "ON CONFLICT(signature) DO UPDATE SET peak_mib = MAX(peak_mib, excluded.peak_mib), "
                            "runs = runs + 1, updated_at = excluded.updated_at");
  Use use{st};
  check(sqlite3_bind_text(st, 1, signature.data(), static_cast<int>(signature.size()), SQLITE_STATIC), "record peak");
  check(sqlite3_bind_int64(st, 2, peak_mib), "record peak");
  check(sqlite3_bind_double(st, 3, t), "record peak");
  step_done(st, "record peak");
}

std::map<std::string, MiB> Store::peaks() {
  Stmt st{prepare("SELECT signature, peak_mib FROM history")};
  std::map<std::string, MiB> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    if (sqlite3_column_type(st.s, 0) == SQLITE_NULL) continue;  // a damaged row: no signature
    out[column_string(st.s, 0)] = sqlite3_column_int64(st.s, 1);
  }
  if (rc != SQLITE_DONE) fail("select history");
  return out;
}

void Store::record_run_peak(const std::string& signature, const std::string& gpu_model, MiB peak_mib,
                            const RunActivity& activity, Seconds t, int keep) {
  {
    sqlite3_stmt* st = cached(db_,
                              "INSERT INTO history_runs(signature, gpu_model, peak_mib, t, gpu_util, smact, smocc, "
                              "drama) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    Use use{st};
    check(sqlite3_bind_text(st, 1, signature.data(), static_cast<int>(signature.size()), SQLITE_STATIC),
          "record run peak");
    check(sqlite3_bind_text(st, 2, gpu_model.data(), static_cast<int>(gpu_model.size()), SQLITE_STATIC),
          "record run peak");
    check(sqlite3_bind_int64(st, 3, peak_mib), "record run peak");
    check(sqlite3_bind_double(st, 4, t), "record run peak");
    int col = 5;
    for (const auto& share : {activity.gpu_util, activity.smact, activity.smocc, activity.drama}) {
      // Clamped: a driver's sample a hair above 1 must not fail the run's record (CHECK).
      check(share ? sqlite3_bind_double(st, col, std::clamp(*share, 0.0, 1.0)) : sqlite3_bind_null(st, col),
            "record run peak");
      ++col;
    }
    step_done(st, "record run peak");
  }
  // Older runs than the window are never read again: the table stays as small as the window.
  sqlite3_stmt* st = cached(db_,
                            "DELETE FROM history_runs WHERE signature = ?1 AND gpu_model = ?2 AND id NOT IN "
                            "(SELECT id FROM history_runs WHERE signature = ?1 AND gpu_model = ?2 "
                            "ORDER BY id DESC LIMIT ?3)");
  Use use{st};
  check(sqlite3_bind_text(st, 1, signature.data(), static_cast<int>(signature.size()), SQLITE_STATIC),
        "prune run peaks");
  check(sqlite3_bind_text(st, 2, gpu_model.data(), static_cast<int>(gpu_model.size()), SQLITE_STATIC),
        "prune run peaks");
  check(sqlite3_bind_int64(st, 3, std::max(1, keep)), "prune run peaks");
  step_done(st, "prune run peaks");
}

std::vector<Store::EndedAttempt> Store::attempts_ended_since(Seconds since) {
  Stmt st{prepare(
      "SELECT j.uid, j.gid, a.launched_at, a.ended_at, a.exclusive, a.admitted_mib, a.gpu_total_mib, "
      "(SELECT COUNT(*) FROM attempt_gpus g WHERE g.job_id = a.job_id AND g.number = a.number), "
      "(SELECT group_concat(g.uuid, ',') FROM attempt_gpus g WHERE g.job_id = a.job_id AND g.number = a.number) "
      "FROM attempts a JOIN jobs j ON j.id = a.job_id "
      "WHERE a.ended_at IS NOT NULL AND a.ended_at >= ?1 AND a.outcome != 'lost' ORDER BY a.ended_at")};
  check(sqlite3_bind_double(st.s, 1, since), "select ended attempts");
  std::vector<EndedAttempt> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    EndedAttempt a;
    a.uid = sqlite3_column_int64(st.s, 0);
    a.gid = sqlite3_column_int64(st.s, 1);
    a.launched_at = sqlite3_column_double(st.s, 2);
    a.ended_at = sqlite3_column_double(st.s, 3);
    a.exclusive = sqlite3_column_int64(st.s, 4) != 0;
    a.admitted_mib = sqlite3_column_int64(st.s, 5);
    a.gpu_total_mib = sqlite3_column_int64(st.s, 6);
    a.gpus = static_cast<int>(sqlite3_column_int64(st.s, 7));
    // (A GPU's UUID has no comma: NVML's "GPU-..." and "MIG-..." forms.)
    const std::string uuids = column_string(st.s, 8);
    for (std::string_view rest = uuids; !rest.empty();) {
      const auto comma = rest.find(',');
      a.gpu_uuids.emplace_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    out.push_back(a);
  }
  if (rc != SQLITE_DONE) fail("select ended attempts");
  return out;
}

// Bounded by the window, not by the store: the signatures are found by skipping through the
// index (one search per signature), then each signature's last completed jobs are read from
// the index's end. (SQL's window function over every successful attempt, tried first, sorted
// them all: slower than the pass over every attempt it was to replace.)
std::vector<Store::RecentRun> Store::recent_successful_runs(int per_signature) {
  Stmt signatures{prepare(
      "WITH RECURSIVE s(signature) AS ("
      " SELECT MIN(signature) FROM jobs WHERE signature > ''"
      " UNION ALL SELECT (SELECT MIN(signature) FROM jobs WHERE signature > s.signature) FROM s"
      "  WHERE s.signature IS NOT NULL) "
      "SELECT signature FROM s WHERE signature IS NOT NULL")};
  Stmt last{prepare(
      "SELECT a.launched_at, a.ended_at FROM jobs j JOIN attempts a ON a.job_id = j.id AND a.outcome = 'completed' "
      "WHERE j.signature = ?1 AND j.state = 'completed' AND a.ended_at IS NOT NULL "
      "ORDER BY j.ended_at DESC, j.id DESC LIMIT ?2")};
  std::vector<RecentRun> out;
  int rc;
  while ((rc = sqlite3_step(signatures.s)) == SQLITE_ROW) {
    const std::string signature = column_string(signatures.s, 0);
    sqlite3_reset(last.s);
    check(sqlite3_bind_text(last.s, 1, signature.data(), static_cast<int>(signature.size()), SQLITE_STATIC),
          "select successful attempts");
    check(sqlite3_bind_int64(last.s, 2, std::max(1, per_signature)), "select successful attempts");
    int step;
    while ((step = sqlite3_step(last.s)) == SQLITE_ROW)
      out.push_back({signature, sqlite3_column_double(last.s, 0), sqlite3_column_double(last.s, 1)});
    if (step != SQLITE_DONE) fail("select successful attempts");
  }
  if (rc != SQLITE_DONE) fail("select signatures");
  std::ranges::stable_sort(out, {}, &RecentRun::ended_at);
  return out;
}

Store::HistoryRuns Store::history_runs() {
  Stmt st{prepare("SELECT signature, gpu_model, peak_mib, gpu_util FROM history_runs ORDER BY id")};
  HistoryRuns out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    if (sqlite3_column_type(st.s, 0) == SQLITE_NULL || sqlite3_column_type(st.s, 1) == SQLITE_NULL) continue;
    const std::string signature = column_string(st.s, 0), model = column_string(st.s, 1);
    out.peaks[signature][model].push_back(sqlite3_column_int64(st.s, 2));
    if (sqlite3_column_type(st.s, 3) != SQLITE_NULL)
      out.utils[signature][model].push_back(sqlite3_column_double(st.s, 3));
  }
  if (rc != SQLITE_DONE) fail("select history runs");
  return out;
}

}  // namespace aegis
