// Time limits (issue 32 item 5): an attempt of a job with JobSpec::time_limit must end by
// its launch plus the limit. The lifecycle keeps the deadlines here; Lifecycle::expire()
// signals the attempts past theirs, which then end failed with a "timeout" reason.
#pragma once
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "core/units.h"

namespace aegis {

class Deadlines {
 public:
  struct Due {
    JobId job = 0;
    int attempt = 0;
    Seconds at = 0;
  };
  void add(JobId job, int attempt, Seconds at) { heap_.push({job, attempt, at}); }
  // Takes every deadline at or before `now` into `out` (earliest first).
  void take_due(Seconds now, std::vector<Due>& out);
  std::optional<Seconds> next() const;
  bool empty() const { return heap_.empty(); }

 private:
  struct Later {
    bool operator()(const Due& a, const Due& b) const { return a.at != b.at ? a.at > b.at : a.job > b.job; }
  };
  std::priority_queue<Due, std::vector<Due>, Later> heap_;
};

// A limit for people: "90s", "45m", "2h", "1h30m", "1d2h".
std::string format_time_limit(Seconds s);

}  // namespace aegis
