// A job as the daemon keeps it: the user's request, who asked, where it stands, and its
// current attempt. This is what the store persists and what listings show.
#pragma once
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "core/job.h"
#include "core/job_state.h"
#include "runtime/api/request.h"

namespace aegis {


// The attempt that holds (or last held) GPUs.
struct Attempt {
  int number = 0;                       // 1, 2, ...
  std::vector<std::string> gpu_uuids;
  Seconds launched_at = 0;              // wall clock, seconds since the epoch
  std::optional<Seconds> first_activity;  // when its observation window started ...
  std::string anchor;                   // ... told from what (lifecycle/activity_anchor.h names; "" before)
  std::optional<Seconds> context_at;    // its first process seen on a GPU (CUDA context creation)
  bool exclusive = false;
  MiB admitted_mib = 0;
  MiB free_at_placement = 0;
  MiB gpu_total_mib = 0;
  pid_t pgid = 0;                       // the job's process group (= its session), 0 until known
  pid_t shim_pid = 0;                   // valid while the attempt's lock is held
  MiB peak_mib = 0;                     // largest per-GPU memory of its processes seen (NVML)
  std::optional<Seconds> ended_at;
  AttemptOutcome outcome = AttemptOutcome::Running;
  std::optional<int> exit_code;         // how its first process ended: exit status ...
  std::optional<int> signal;            // ... or the signal that killed it
  std::string detail;                   // the classifier's line
};

// The process a job is attached to (`aegis run` waiting for it): when it is gone, the job
// is cancelled. Its start time tells it apart from a later process with the same pid.
struct ClientProcess {
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;        // field 22 of /proc/PID/stat
};

struct DaemonJob {
  JobId id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;
  api::JobRequest request;
  JobState state = JobState::Queued;
  bool in_recovery_queue = false;       // queued jobs only
  std::int64_t queue_seq = 0;           // order within its queue
  RecoveryState recovery;
  Seconds submitted_at = 0;
  std::optional<Seconds> started_at;    // first launch
  std::optional<Seconds> ended_at;
  bool cancel_requested = false;
  std::string reason;                   // why it failed, was cancelled or waits
  std::vector<Attempt> attempts;
  std::optional<ClientProcess> attached_to;
  // Its predicted mean GPU utilisation alone (the lpa order's JobSpec::predicted_util), made
  // once at submission, and where from: "history" or "model-spec" ("" when none).
  std::optional<double> predicted_util;
  std::string predicted_util_source;
  // Issue 32 items 3-4 (store: job_array, job_after): the array it is an element of (the
  // job id of its first element, its own for that one) and its index there, the array's
  // cap (%N; 0: none), and its dependencies as the lifecycle expanded them: (job, ok|any|failed).
  std::optional<JobId> array_id;
  int array_index = -1;
  int array_limit = 0;
  std::vector<std::pair<JobId, std::string>> after;
  // Preemption (issue 32 item 1, lifecycle/lifecycle.h LifeJob): being stopped so that
  // `preempted_for` can start; warned then, to be stopped by `preempt_stop_at`.
  std::optional<JobId> preempted_for;
  Seconds preempt_warned_at = 0, preempt_stop_at = 0;
  bool preempt_stopping = false;

  Attempt* current() { return attempts.empty() ? nullptr : &attempts.back(); }
  const Attempt* current() const { return attempts.empty() ? nullptr : &attempts.back(); }
};

}  // namespace aegis
