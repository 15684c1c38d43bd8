#include "runtime/store/store.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/job/job_json.h"

namespace aegis {

namespace {

// Finalises a prepared statement on every path.
struct Stmt {
  sqlite3_stmt* s;
  ~Stmt() { sqlite3_finalize(s); }
};

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  uid INTEGER NOT NULL,
  state TEXT NOT NULL,
  queue_seq INTEGER NOT NULL,
  submitted_at REAL NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
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
CREATE TABLE IF NOT EXISTS quarantine (id INTEGER PRIMARY KEY, uid, state, data, reason TEXT, t REAL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('schema', '1');
)";

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

// The job record in column `col` of the current row of `s` (the row of job `row_id`);
// nullopt and `error` when it cannot be read or parsed.
std::optional<DaemonJob> read_record(sqlite3_stmt* s, int col, JobId row_id, std::string& error) {
  if (sqlite3_column_type(s, col) == SQLITE_NULL) {
    error = "job record: missing (NULL)";
    return std::nullopt;
  }
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  if (!text) {
    error = "job record: cannot be read (out of memory)";
    return std::nullopt;
  }
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

}  // namespace

Store::Store(const std::string& path, bool full_sync) {
  for (const auto& f : {path, path + "-wal", path + "-shm"}) check_db_file(f);
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
    exec(kSchema, "create tables");
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
    sqlite3_close_v2(rdb_);
    sqlite3_close_v2(db_);
    rdb_ = db_ = nullptr;
    throw;
  }
}

Store::~Store() {
  sqlite3_close_v2(rdb_);
  sqlite3_close_v2(db_);
}

void Store::fail(const std::string& what, sqlite3* db) {
  if (!db) db = db_;
  last_error_full_ = disk_full(db);
  throw StoreError(one_line("database: " + what + ": " + sqlite3_errmsg(db)), last_error_full_);
}

void Store::check(int rc, const char* what, sqlite3* db) {
  if (rc != SQLITE_OK) fail(what, db);
}

void Store::exec(const char* sql, const char* what) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(what);
}

sqlite3_stmt* Store::prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    fail("prepare", db);
  }
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
  // SQLite rolls a transaction back by itself after some errors (SQLITE_FULL, I/O);
  // ROLLBACK would then fail ("no transaction is active"). Called from destructors.
  if (!db_ || sqlite3_get_autocommit(db_) != 0) return;
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

bool Store::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

std::int64_t Store::next_queue_seq() { return next_seq_++; }

void Store::reserve_ids_above(JobId floor) {
  if (floor <= 0) return;
  const bool own = !in_transaction();
  if (own) begin();
  try {
    std::optional<std::int64_t> seq;
    {
      Stmt st{prepare("SELECT MAX(seq) FROM sqlite_sequence WHERE name = 'jobs'")};
      const int rc = sqlite3_step(st.s);
      if (rc != SQLITE_ROW) fail("read id sequence");
      if (sqlite3_column_type(st.s, 0) != SQLITE_NULL) seq = sqlite3_column_int64(st.s, 0);
    }
    if (!seq || *seq < floor) {
      // AUTOINCREMENT gives max(seq, largest id) + 1.
      Stmt st{prepare(seq ? "UPDATE sqlite_sequence SET seq = ? WHERE name = 'jobs'"
                          : "INSERT INTO sqlite_sequence(seq, name) VALUES(?, 'jobs')")};
      check(sqlite3_bind_int64(st.s, 1, floor), "reserve ids");
      if (sqlite3_step(st.s) != SQLITE_DONE) fail("reserve ids");
    }
    if (own) commit();
  } catch (...) {
    if (own) rollback();
    throw;
  }
}

void Store::insert(DaemonJob& job) {
  job.queue_seq = next_queue_seq();
  Stmt st{prepare("INSERT INTO jobs(uid, state, queue_seq, submitted_at, data) VALUES(?, ?, ?, ?, '{}')")};
  const auto state = std::string(to_string(job.state));
  check(sqlite3_bind_int64(st.s, 1, job.uid), "insert job");
  check(sqlite3_bind_text(st.s, 2, state.c_str(), -1, SQLITE_TRANSIENT), "insert job");
  check(sqlite3_bind_int64(st.s, 3, job.queue_seq), "insert job");
  check(sqlite3_bind_double(st.s, 4, job.submitted_at), "insert job");
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("insert job");
  job.id = sqlite3_last_insert_rowid(db_);
  update(job);
}

void Store::update(const DaemonJob& job) {
  std::string data;
  try {
    data = to_json(job).dump();
  } catch (const std::exception& e) {
    last_error_full_ = false;
    throw StoreError(one_line("database: job " + std::to_string(job.id) + ": cannot encode its record: " + e.what()));
  }
  Stmt st{prepare("UPDATE jobs SET state = ?, queue_seq = ?, data = ? WHERE id = ?")};
  const auto state = std::string(to_string(job.state));
  check(sqlite3_bind_text(st.s, 1, state.c_str(), -1, SQLITE_TRANSIENT), "update job");
  check(sqlite3_bind_int64(st.s, 2, job.queue_seq), "update job");
  check(sqlite3_bind_text(st.s, 3, data.c_str(), static_cast<int>(data.size()), SQLITE_TRANSIENT), "update job");
  check(sqlite3_bind_int64(st.s, 4, job.id), "update job");
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("update job");
}

void Store::event(JobId id, Seconds t, const std::string& kind, const std::string& detail) {
  Stmt st{prepare("INSERT INTO events(job_id, t, kind, detail) VALUES(?, ?, ?, ?)")};
  check(sqlite3_bind_int64(st.s, 1, id), "insert event");
  check(sqlite3_bind_double(st.s, 2, t), "insert event");
  check(sqlite3_bind_text(st.s, 3, kind.c_str(), static_cast<int>(kind.size()), SQLITE_TRANSIENT), "insert event");
  check(sqlite3_bind_text(st.s, 4, detail.c_str(), static_cast<int>(detail.size()), SQLITE_TRANSIENT), "insert event");
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("insert event");
}

std::optional<DaemonJob> Store::get(JobId id) {
  const std::string job = "job " + std::to_string(id);
  {
    Stmt st{prepare(rdb_, "SELECT id, data FROM jobs WHERE id = ?")};
    check(sqlite3_bind_int64(st.s, 1, id), "select job", rdb_);
    const int rc = sqlite3_step(st.s);
    if (rc == SQLITE_ROW) {
      std::string error;
      if (auto j = read_record(st.s, 1, id, error)) return j;
      // Not the parser's words: they may quote the record, and anyone may ask.
      last_error_full_ = false;
      throw StoreError("database: " + job + ": its record is damaged and cannot be read");
    }
    if (rc != SQLITE_DONE) fail("select " + job, rdb_);
  }
  Stmt st{prepare(rdb_, "SELECT 1 FROM quarantine WHERE id = ?")};
  check(sqlite3_bind_int64(st.s, 1, id), "select quarantine", rdb_);
  const int rc = sqlite3_step(st.s);
  if (rc == SQLITE_ROW) {
    last_error_full_ = false;
    throw StoreError("database: " + job + ": its record is damaged and was set aside (table quarantine)");
  }
  if (rc != SQLITE_DONE) fail("select quarantine", rdb_);
  return std::nullopt;
}

void Store::quarantine(const Quarantined& q) {
  // Moved in one go: the row leaves `jobs` only if it lands in `quarantine`.
  const bool outer = in_transaction();
  exec("SAVEPOINT quarantine", "quarantine");
  try {
    {
      Stmt st{prepare("INSERT OR REPLACE INTO quarantine(id, uid, state, data, reason, t) "
                      "SELECT id, uid, state, data, ?, ? FROM jobs WHERE id = ?")};
      check(sqlite3_bind_text(st.s, 1, q.reason.c_str(), static_cast<int>(q.reason.size()), SQLITE_TRANSIENT),
            "quarantine");
      check(sqlite3_bind_double(st.s, 2, wall_now()), "quarantine");
      check(sqlite3_bind_int64(st.s, 3, q.id), "quarantine");
      if (sqlite3_step(st.s) != SQLITE_DONE) fail("quarantine job " + std::to_string(q.id));
    }
    {
      Stmt st{prepare("DELETE FROM jobs WHERE id = ?")};
      check(sqlite3_bind_int64(st.s, 1, q.id), "quarantine");
      if (sqlite3_step(st.s) != SQLITE_DONE) fail("quarantine job " + std::to_string(q.id));
    }
    exec("RELEASE quarantine", "quarantine");
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
  quarantined_.clear();
  std::vector<DaemonJob> out;
  {
    Stmt st{prepare("SELECT id, data FROM jobs WHERE state IN ('queued', 'running') ORDER BY queue_seq")};
    int rc;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
      const JobId id = sqlite3_column_int64(st.s, 0);
      std::string error;
      if (auto j = read_record(st.s, 1, id, error)) {
        next_seq_ = std::max(next_seq_, j->queue_seq + 1);
        out.push_back(std::move(*j));
      } else {
        quarantined_.push_back({id, error});
      }
    }
    if (rc != SQLITE_DONE) fail("select unfinished jobs");
  }
  for (auto& q : quarantined_) {
    try {
      quarantine(q);
    } catch (const StoreError& e) {
      // Left where it is (and not loaded): reported again at the next start.
      q.reason += std::string(" (could not be moved: ") + e.what() + ")";
    }
  }
  return out;
}

// The rows of a listing's statement (id, data): parsed jobs; rows that cannot be parsed
// are skipped and counted, an error reading the table throws.
std::vector<DaemonJob> Store::listed(sqlite3_stmt* s) {
  std::vector<DaemonJob> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    std::string error;
    if (auto j = read_record(s, 1, sqlite3_column_int64(s, 0), error)) out.push_back(std::move(*j));
    else ++list_skipped_;
  }
  if (rc != SQLITE_DONE) fail("select jobs", rdb_);
  return out;
}

std::vector<DaemonJob> Store::list(bool all, std::int64_t limit) {
  list_skipped_ = 0;
  Stmt st{prepare(rdb_, all ? "SELECT id, data FROM jobs ORDER BY id DESC LIMIT ?"
                            : "SELECT id, data FROM jobs WHERE state IN ('queued', 'running') ORDER BY queue_seq LIMIT ?")};
  check(sqlite3_bind_int64(st.s, 1, limit), "select jobs", rdb_);
  return listed(st.s);
}

std::vector<DaemonJob> Store::list_page(JobId before, std::int64_t limit, std::optional<uid_t> uid) {
  list_skipped_ = 0;
  Stmt st{prepare(rdb_, uid ? "SELECT id, data FROM jobs WHERE id < ? AND uid = ? ORDER BY id DESC LIMIT ?"
                            : "SELECT id, data FROM jobs WHERE id < ? ORDER BY id DESC LIMIT ?")};
  int n = 1;
  check(sqlite3_bind_int64(st.s, n++, before > 0 ? before : std::numeric_limits<JobId>::max()), "select jobs", rdb_);
  if (uid) check(sqlite3_bind_int64(st.s, n++, *uid), "select jobs", rdb_);
  check(sqlite3_bind_int64(st.s, n, limit), "select jobs", rdb_);
  return listed(st.s);
}

JobId Store::next_id() {
  Stmt st{prepare("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0), "
                  "COALESCE((SELECT MAX(id) FROM jobs), 0)")};
  if (sqlite3_step(st.s) != SQLITE_ROW) fail("next id");
  return std::max(sqlite3_column_int64(st.s, 0), sqlite3_column_int64(st.s, 1)) + 1;
}

std::vector<Store::Event> Store::events(JobId id) {
  Stmt st{prepare(rdb_, "SELECT t, kind, detail FROM events WHERE job_id = ? ORDER BY id")};
  check(sqlite3_bind_int64(st.s, 1, id), "select events", rdb_);
  std::vector<Event> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW)
    out.push_back({id, sqlite3_column_double(st.s, 0), column_string(st.s, 1), column_string(st.s, 2)});
  if (rc != SQLITE_DONE) fail("select events", rdb_);
  return out;
}

void Store::record_peak(const std::string& signature, MiB peak_mib, Seconds t) {
  Stmt st{prepare("INSERT INTO history(signature, peak_mib, runs, updated_at) VALUES(?, ?, 1, ?) "
                  "ON CONFLICT(signature) DO UPDATE SET peak_mib = MAX(peak_mib, excluded.peak_mib), "
                  "runs = runs + 1, updated_at = excluded.updated_at")};
  check(sqlite3_bind_text(st.s, 1, signature.c_str(), static_cast<int>(signature.size()), SQLITE_TRANSIENT),
        "record peak");
  check(sqlite3_bind_int64(st.s, 2, peak_mib), "record peak");
  check(sqlite3_bind_double(st.s, 3, t), "record peak");
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("record peak");
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

}  // namespace aegis
