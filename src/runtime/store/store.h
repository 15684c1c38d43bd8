// The daemon's durable state: one SQLite database (WAL) in the state directory. Every
// job is a row (its full record as JSON, plus indexed columns); every state change is an
// event row. A change is committed before the daemon acts on it or replies.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/job/job.h"

struct sqlite3;
struct sqlite3_stmt;

namespace aegis {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Store {
 public:
  // Opens (creating if needed) the database. `full_sync`: fsync at every commit
  // (survives power loss); otherwise the WAL survives process crashes only.
  Store(const std::string& path, bool full_sync);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Group commit: changes between begin() and commit() land together.
  void begin();
  void commit();
  void rollback();
  bool in_transaction() const;

  // Gives the job its id and queue position and saves it.
  void insert(DaemonJob& job);
  void update(const DaemonJob& job);
  void event(JobId id, Seconds t, const std::string& kind, const std::string& detail);

  std::optional<DaemonJob> get(JobId id);
  std::vector<DaemonJob> unfinished();                 // queued and running, by queue order
  std::vector<DaemonJob> list(bool all, std::int64_t limit);  // newest first when `all`
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

 private:
  void exec(const char* sql);
  sqlite3_stmt* prepare(const char* sql);
  std::vector<DaemonJob> select_jobs(sqlite3_stmt* stmt);
  [[noreturn]] void fail(const std::string& what);

  sqlite3* db_ = nullptr;
  std::int64_t next_seq_ = 1;
};

}  // namespace aegis
