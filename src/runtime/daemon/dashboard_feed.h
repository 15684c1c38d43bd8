// What the dashboard serves, handed from aegisd's event loop to the dashboard's threads:
// the latest `aegis gpus` and `aegis queue --all` replies (built by the very request
// handlers the CLI reaches) and a bounded ring of per-tick samples for the charts. The
// event loop only swaps pointers under a short lock; readers never touch the Daemon.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
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

class DashboardFeed {
 public:
  // Keeps the last `capacity` frames (dashboard_history_s at the telemetry rate).
  explicit DashboardFeed(std::size_t capacity) : capacity_(capacity) {}

  // Event loop: after each tick. Builds the replies only while someone watched recently
  // (a `queue --all` listing reads the whole store); the frame is cheap and always kept.
  void publish(Daemon& d, double now);

  // Dashboard threads. The replies, as the socket API sends them (one JSON line each),
  // waiting up to `wait_s` for fresh ones when the last are older than a tick or two.
  struct Replies {
    std::shared_ptr<const std::string> gpus, queue, active;  // `gpus`, `queue --all`, `queue`
    double at = 0;
  };
  Replies replies(double now, double wait_s);
  // Frames after `since` (all kept ones when 0) as JSON, oldest first.
  std::string frames_json(double since) const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable fresh_;
  Replies latest_;
  double watched_at_ = 0;            // the last request of a dashboard reader
  std::deque<DashboardFrame> frames_;
};

// The reply to a request as the socket API would send it: the object, or a streamed
// listing drained into one line.
std::string reply_text(Reply r);

}  // namespace aegis
