// Issue 32 item 6: which of a job's committed lifecycle changes its owner is told of
// (`aegis submit --notify`), and the JSON payload they get (docs/api.md, "Notifications").
// Pure: the daemon maps each change here after its commit and hands the notice to the
// Notifier (notifier.h), which delivers it off the event loop. Nothing here decides.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "core/units.h"
#include "runtime/api/notify_set.h"
#include "runtime/job/job.h"

namespace aegis {

// One notification, ready to deliver: whose it is (the hook runs as them; the queue is
// bounded per uid) and the payload, one line of JSON.
struct Notice {
  JobId job = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;
  std::string event;    // the payload's "event"
  std::string payload;
};

// The payload event a lifecycle change (Effects::Change::event) is told as, and the --notify
// event that asks for it: launch -> start; oom -> oom; requeue -> requeue (asked for with
// oom: the recovery); completed -> end; failed -> fail; cancelled -> cancel. Every other
// change (submit, activity, exit before the recovery rule decides, cancel asked) is told to
// nobody: null.
struct NoticeKind {
  std::string_view event;
  api::NotifyEvent asked_by;
};
std::optional<NoticeKind> notice_kind(std::string_view change_event);

// Longest reason a payload carries (bytes; longer ones are cut, marked with "...").
inline constexpr std::size_t kNoticeReasonMaxBytes = 1024;

// The notice for a change of `rec` (as persisted, after the change), or null when the change
// is told to nobody or its owner did not ask for it. `detail`: the change's words (the
// payload's reason; the job's own reason when empty). `now`: wall-clock seconds.
std::optional<Notice> notice_for(const DaemonJob& rec, std::string_view change_event, std::string_view detail,
                                 Seconds now);

// The payload itself (notice_for and the ETA event): {"version": 1, "job", "user", "uid",
// "name", "event", "state", "reason", "time", "attempt"} plus `extra`'s fields. `attempt` is
// the one the event is about (for oom and requeue the last that ended); a requeue's state
// is "queued" even if the same pass started the job again.
Notice make_notice(const DaemonJob& rec, std::string_view event, std::string_view reason, Seconds now,
                   const std::map<std::string, double>& extra = {});

// The ETA-slip event's rule (item 5's `aegis queue --eta` computes the ETAs): per waiting
// job, the start time last promised to its owner (the first ETA seen, then the last one
// notified). An ETA later than that by more than `threshold_s` is a slip: it is reported
// and becomes the new promise; an earlier ETA becomes the promise at once (a later slip is
// measured from what the owner was last told, or better news).
class EtaSlipWatch {
 public:
  explicit EtaSlipWatch(double threshold_s) : threshold_s_(threshold_s) {}
  // The slip (seconds) when `eta` slipped past the promise by more than the threshold.
  std::optional<double> update(JobId id, Seconds eta);
  void forget(JobId id) { promised_.erase(id); }  // it started or ended
  std::size_t watched() const { return promised_.size(); }

 private:
  double threshold_s_;
  std::map<JobId, Seconds> promised_;
};

}  // namespace aegis
