// A job's life in words every layer shares: where a job stands (JobState) and how one of
// its attempts ended (AttemptOutcome). Both are persisted (by name) and shown to users;
// the names are part of the API (docs/api.md) and never change meaning.
#pragma once
#include <array>
#include <optional>
#include <string_view>

namespace aegis {

enum class JobState { Queued, Running, Completed, Failed, Cancelled };

inline bool is_final(JobState s) { return s == JobState::Completed || s == JobState::Failed || s == JobState::Cancelled; }

enum class AttemptOutcome {
  Running,      // not ended yet
  Completed,    // exit status 0
  Oom,          // died of out-of-memory: the recovery rule decides what follows
  Failed,       // another failure (exit status, signal): the job stops
  FailedStart,  // never ran: exec, chdir or setuid failed (with the errno)
  Cancelled,    // a cancel reached it
  Lost,         // never started: the launch was interrupted (it goes back to its place)
  Unknown,      // may have run, but nothing recorded how it ended (not run again unless restartable)
};

constexpr std::string_view to_string(JobState s) {
  constexpr std::array<std::string_view, 5> names = {"queued", "running", "completed", "failed", "cancelled"};
  return names[static_cast<std::size_t>(s)];
}

constexpr std::string_view to_string(AttemptOutcome o) {
  // "" for a running attempt, as the API has always shown it.
  constexpr std::array<std::string_view, 8> names = {"", "completed", "oom", "failed", "failed-start", "cancelled",
                                                      "lost", "unknown"};
  return names[static_cast<std::size_t>(o)];
}

constexpr std::optional<JobState> parse_job_state(std::string_view s) {
  for (auto st : {JobState::Queued, JobState::Running, JobState::Completed, JobState::Failed, JobState::Cancelled})
    if (to_string(st) == s) return st;
  return std::nullopt;
}

constexpr std::optional<AttemptOutcome> parse_attempt_outcome(std::string_view s) {
  for (auto o : {AttemptOutcome::Running, AttemptOutcome::Completed, AttemptOutcome::Oom, AttemptOutcome::Failed,
                 AttemptOutcome::FailedStart, AttemptOutcome::Cancelled, AttemptOutcome::Lost, AttemptOutcome::Unknown})
    if (to_string(o) == s) return o;
  return std::nullopt;
}

}  // namespace aegis
