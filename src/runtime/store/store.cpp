#include "runtime/store/store.h"

#include <sqlite3.h>

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
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('schema', '1');
)";

}  // namespace

Store::Store(const std::string& path, bool full_sync) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError(path + ": cannot open database: " + msg);
  }
  sqlite3_busy_timeout(db_, 5000);
  exec("PRAGMA journal_mode=WAL");
  exec(full_sync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  exec("PRAGMA foreign_keys=ON");
  exec(kSchema);
  Stmt st{prepare("SELECT COALESCE(MAX(queue_seq), 0) FROM jobs")};
  if (sqlite3_step(st.s) == SQLITE_ROW) next_seq_ = sqlite3_column_int64(st.s, 0) + 1;
}

Store::~Store() { sqlite3_close(db_); }

void Store::fail(const std::string& what) { throw StoreError(what + ": " + sqlite3_errmsg(db_)); }

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError(std::string("database: ") + msg);
  }
}

sqlite3_stmt* Store::prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) fail("database: prepare");
  return s;
}

void Store::begin() { exec("BEGIN IMMEDIATE"); }
void Store::commit() { exec("COMMIT"); }
void Store::rollback() { exec("ROLLBACK"); }
bool Store::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

std::int64_t Store::next_queue_seq() { return next_seq_++; }

void Store::insert(DaemonJob& job) {
  job.queue_seq = next_queue_seq();
  Stmt st{prepare("INSERT INTO jobs(uid, state, queue_seq, submitted_at, data) VALUES(?, ?, ?, ?, '{}')")};
  sqlite3_bind_int64(st.s, 1, job.uid);
  const auto state = std::string(to_string(job.state));
  sqlite3_bind_text(st.s, 2, state.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 3, job.queue_seq);
  sqlite3_bind_double(st.s, 4, job.submitted_at);
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("database: insert job");
  job.id = sqlite3_last_insert_rowid(db_);
  update(job);
}

void Store::update(const DaemonJob& job) {
  Stmt st{prepare("UPDATE jobs SET state = ?, queue_seq = ?, data = ? WHERE id = ?")};
  const auto state = std::string(to_string(job.state));
  const auto data = to_json(job).dump();
  sqlite3_bind_text(st.s, 1, state.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 2, job.queue_seq);
  sqlite3_bind_text(st.s, 3, data.c_str(), static_cast<int>(data.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 4, job.id);
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("database: update job");
}

void Store::event(JobId id, Seconds t, const std::string& kind, const std::string& detail) {
  Stmt st{prepare("INSERT INTO events(job_id, t, kind, detail) VALUES(?, ?, ?, ?)")};
  sqlite3_bind_int64(st.s, 1, id);
  sqlite3_bind_double(st.s, 2, t);
  sqlite3_bind_text(st.s, 3, kind.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 4, detail.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("database: insert event");
}

std::vector<DaemonJob> Store::select_jobs(sqlite3_stmt* s) {
  std::vector<DaemonJob> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    try {
      out.push_back(job_from_json(nlohmann::json::parse(text ? text : "{}")));
    } catch (const std::exception& e) {
      throw StoreError(std::string("database: unreadable job record: ") + e.what());
    }
  }
  if (rc != SQLITE_DONE) fail("database: select jobs");
  return out;
}

std::optional<DaemonJob> Store::get(JobId id) {
  Stmt st{prepare("SELECT data FROM jobs WHERE id = ?")};
  sqlite3_bind_int64(st.s, 1, id);
  auto jobs = select_jobs(st.s);
  if (jobs.empty()) return std::nullopt;
  return std::move(jobs.front());
}

std::vector<DaemonJob> Store::unfinished() {
  Stmt st{prepare("SELECT data FROM jobs WHERE state IN ('queued', 'running') ORDER BY queue_seq")};
  return select_jobs(st.s);
}

std::vector<DaemonJob> Store::list(bool all, std::int64_t limit) {
  Stmt st{prepare(all ? "SELECT data FROM jobs ORDER BY id DESC LIMIT ?"
                      : "SELECT data FROM jobs WHERE state IN ('queued', 'running') ORDER BY queue_seq LIMIT ?")};
  sqlite3_bind_int64(st.s, 1, limit);
  return select_jobs(st.s);
}

std::vector<Store::Event> Store::events(JobId id) {
  Stmt st{prepare("SELECT t, kind, detail FROM events WHERE job_id = ? ORDER BY id")};
  sqlite3_bind_int64(st.s, 1, id);
  std::vector<Event> out;
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    out.push_back({id, sqlite3_column_double(st.s, 0), reinterpret_cast<const char*>(sqlite3_column_text(st.s, 1)),
                   reinterpret_cast<const char*>(sqlite3_column_text(st.s, 2))});
  }
  return out;
}

void Store::record_peak(const std::string& signature, MiB peak_mib, Seconds t) {
  Stmt st{prepare("INSERT INTO history(signature, peak_mib, runs, updated_at) VALUES(?, ?, 1, ?) "
                  "ON CONFLICT(signature) DO UPDATE SET peak_mib = MAX(peak_mib, excluded.peak_mib), "
                  "runs = runs + 1, updated_at = excluded.updated_at")};
  sqlite3_bind_text(st.s, 1, signature.c_str(), static_cast<int>(signature.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 2, peak_mib);
  sqlite3_bind_double(st.s, 3, t);
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("database: record peak");
}

std::map<std::string, MiB> Store::peaks() {
  Stmt st{prepare("SELECT signature, peak_mib FROM history")};
  std::map<std::string, MiB> out;
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    const auto* sig = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    out[std::string(sig, static_cast<std::size_t>(sqlite3_column_bytes(st.s, 0)))] = sqlite3_column_int64(st.s, 1);
  }
  return out;
}

}  // namespace aegis
