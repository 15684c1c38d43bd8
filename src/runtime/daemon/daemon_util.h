// Small pieces the daemon's files share: the transaction guard, a job's history signature
// (job/job_signature.h), how a job is shown, and the daemon's fixed numbers (each with its
// reason).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "estimate/history.h"
#include "runtime/job/job.h"
#include "runtime/job/job_json.h"
#include "runtime/job/job_signature.h"  // signature_of
#include "runtime/store/store.h"

namespace aegis {

// An attempt whose shim ended before starting the job goes back to the queue; this many
// in a row end the job instead (something is wrong with the host, not with the job).
inline constexpr int kMaxUnstartedAttempts = 3;
// After a launch failed for want of disk, descriptors or memory, launches wait this long.
inline constexpr double kLaunchBackoffS = 5;
// Listings are sent in pages of this many jobs; `queue --all` lists this many at most.
inline constexpr std::size_t kListPage = 256;
inline constexpr std::int64_t kMaxListed = 100000;
// Issue 33 item 1: the store is read this many jobs at a time for a listing: each job read
// whole may be megabytes (a 1 MiB argv, its environment) until its listing view cuts it.
inline constexpr std::int64_t kStoreListPage = 16;
// The id watermark on disk (id_floor.h) runs this far ahead of the ids given out.
inline constexpr JobId kIdFloorStep = 1000;
// A `logs` reply carries at most this much of a log (the client reads on): with JSON's
// escaping, one reply stays under a few MiB however the request's max_bytes is set.
inline constexpr std::uint64_t kMaxLogReply = 256 << 10;

// Begins a transaction unless the caller (the event loop's group commit) has one open.
class Tx {
 public:
  explicit Tx(Store& s) : s_(s), own_(!s.in_transaction()) {
    if (own_) s_.begin();
  }
  ~Tx() {
    if (own_ && !done_) s_.rollback();
  }
  Tx(const Tx&) = delete;
  Tx& operator=(const Tx&) = delete;
  void commit() {
    if (own_) s_.commit();
    done_ = true;
  }

 private:
  Store& s_;
  bool own_;
  bool done_ = false;
};

inline nlohmann::json error_reply(const std::string& msg) { return {{"ok", false}, {"error", msg}}; }

// What `show` gives of a job (whole); the environment only to those who may manage it.
inline nlohmann::json public_view(const DaemonJob& j, bool with_env) {
  nlohmann::json v = to_json(j);
  if (!with_env) v["request"].erase("env");
  return v;
}

// Issue 33 item 1: what a listing (queue, history) shows of a job: no environment, long
// strings cut to max_bytes (listed in `cut`); `aegis show` gives the whole record.
inline nlohmann::json listing_view(const DaemonJob& j, std::size_t max_bytes) { return to_listing_json(j, max_bytes); }

}  // namespace aegis
