// What the dashboard serves, handed from aegisd's event loop to the dashboard's threads:
// the latest `aegis gpus` and `aegis queue --all` replies (built by the very request
// handlers the CLI reaches) and a bounded ring of per-tick samples for the charts. The
// event loop only swaps pointers under a short lock; readers never touch the Daemon.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/daemon/daemon.h"

namespace aegis {

// One tick as the charts need it: each GPU's memory in use and SM activity (null where
// NVML gives none), and each running job's GPU memory (its processes, summed per GPU).
struct DashboardFrame {
  double t = 0;
  struct Gpu {
    std::int64_t used_mib = 0;
    std::optional<double> smact;
    bool observing = false;
  };
  std::vector<Gpu> gpus;
  struct Job {
    JobId id = 0;
    std::vector<int> gpus;          // indices into `gpus`
    std::vector<std::int64_t> mib;  // per entry of `gpus`
  };
  std::vector<Job> jobs;
};

// Issue 33 item 1: the job fields the page (dashboard.html) shows; its listings carry only
// these (and each job's strings cut at listing_string_bytes, as every listing's are).
inline constexpr const char* kDashboardFields[] = {"id", "name", "user", "state", "gpus", "gpu_uuids", "attempts",
                                                   "attempt_log", "submitted_at", "started_at", "ended_at",
                                                   "reason", "recovery"};

class DashboardFeed {
 public:
  // Keeps the last `capacity` frames (dashboard_history_s at the telemetry rate) and lists
  // the newest `max_jobs` jobs (dashboard_max_jobs).
  DashboardFeed(std::size_t capacity, std::int64_t max_jobs) : capacity_(capacity), max_jobs_(max_jobs) {}

  // Event loop: after each tick. Builds the replies only when a reader asked since they
  // were last built (a listing reads the store: ~10 ms for 200 jobs), so at most once per
  // tick and, for one page polling, once per poll; the frame is cheap and always kept.
  void publish(Daemon& d, double now);

  // Dashboard threads. The replies, as the socket API sends them (one JSON line each);
  // when the last were built more than `wait_s` ago, it waits up to `wait_s` for the next
  // tick's.
  struct Replies {
    // `gpus`; `history --limit max_jobs`: the newest jobs of `queue --all`, by the same
    // handler; `queue`: running and queued jobs in serving order, why the head waits.
    std::shared_ptr<const std::string> gpus, queue, active;
    double at = 0;
  };
  Replies replies(double now, double wait_s);
  // The same without waiting, for the dashboard's poll loop: the replies for a reader that
  // asked at `asked` once they are fresh enough (as above) or `wait_s` has passed by `now`;
  // until then nothing. `on_publish` (set once; nullptr to clear) runs after each build,
  // under the feed's lock, so that the loop wakes; it must be quick.
  std::optional<Replies> replies_ready(double asked, double now, double wait_s);
  void on_publish(std::function<void()> f);
  // Frames after `since` (all kept ones when 0) as JSON, oldest first.
  std::string frames_json(double since) const;

 private:
  const std::size_t capacity_;
  const std::int64_t max_jobs_;
  mutable std::mutex mu_;
  std::condition_variable fresh_;
  Replies latest_;
  bool wanted_ = false;              // a reader asked since the replies were last built
  std::function<void()> on_publish_;
  std::deque<DashboardFrame> frames_;
};

// The reply to a request as the socket API would send it: the object, or a streamed
// listing drained into one line.
std::string reply_text(Reply r);

}  // namespace aegis
