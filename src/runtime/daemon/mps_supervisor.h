// Supervision of the managed MPS control daemons (one per GPU): any user may stop one
// through its world-writable control pipe (`echo quit`), as MPS requires the pipe to be.
// Checked alive every mps_check_interval_s, and at once when a job could not connect; a
// stopped one is restarted, a failed restart retried after mps_restart_backoff_s doubling,
// up to mps_restart_limit tries in a row, then given up (its GPU takes no job). It remembers
// each GPU's outages so the daemon can tell an attempt that ended in one (docs/daemon.md).
#pragma once
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"
#include "runtime/daemon/config.h"

namespace aegis {

class MpsSupervisor {
 public:
  // `s` is kept by reference (the daemon's settings); it watches nothing unless aegisd
  // manages MPS.
  MpsSupervisor(const DaemonSettings& s, std::vector<std::string> gpu_uuids, Seconds now);

  bool active() const { return !gpus_.empty(); }
  // Checks every GPU when due (or now, with `force`), restarts what is gone when its try is
  // due. Returns one log line per thing that happened.
  std::vector<std::string> check(Seconds now, bool force);
  // Why no job may be placed on this GPU now: its daemon is down (restart pending) or given
  // up; "" when it may.
  std::string unavailable(const std::string& gpu_uuid) const;
  // Whether an attempt on this GPU that ran from `from` to `to` overlapped an outage: from
  // the last check that found the daemon alive before it was found gone, to its restart.
  bool outage_during(const std::string& gpu_uuid, Seconds from, Seconds to) const;

 private:
  static constexpr Seconds kOngoing = std::numeric_limits<Seconds>::infinity();
  static constexpr std::size_t kOutagesKept = 16;  // attempts end within a tick or two of one
  struct Watch {
    std::string uuid;
    Seconds last_alive = 0;
    bool down = false;
    bool given_up = false;
    int failed_tries = 0;
    Seconds next_try = 0;
    std::string last_error;
    std::deque<std::pair<Seconds, Seconds>> outages;  // [from, to]; to = kOngoing while down
  };
  void restart(Watch& w, Seconds now, std::vector<std::string>& log);

  const DaemonSettings& s_;
  std::vector<Watch> gpus_;
  Seconds last_check_ = 0;
};

}  // namespace aegis
