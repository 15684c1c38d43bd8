#include "runtime/job/job.h"

namespace aegis {

std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::Queued: return "queued";
    case JobState::Running: return "running";
    case JobState::Completed: return "completed";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
  }
  return "queued";
}

std::optional<JobState> parse_job_state(std::string_view s) {
  for (auto st : {JobState::Queued, JobState::Running, JobState::Completed, JobState::Failed, JobState::Cancelled})
    if (to_string(st) == s) return st;
  return std::nullopt;
}

}  // namespace aegis
