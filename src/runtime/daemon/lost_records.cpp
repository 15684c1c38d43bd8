// Issue 33 item 6: jobs whose database records were lost with the write-ahead log (a disk
// fault, an administrator's rm of aegis.db-wal while aegisd was down). SQLite then opens
// the database as of its last checkpoint, without a word; what outlives the loss is each
// attempt's directory, which aegisd itself wrote as root before the attempt started
// (launch_file.h, attempt_dir.h). At start, an attempt found there that its job's record
// does not know (no record at all, or a record older than its attempts) is stopped and
// its job recorded as lost with the reason: its owner sees it in `aegis show` and
// `aegis history`, the administrator in the log (error) and the metrics. Nothing of the
// user's is interpreted here: argv and workdir are copied as data into the record.
//
// It is not re-adopted: what the scheduler needs to hold it (the request's memory,
// estimates, priority, limits, dependencies, notifications) was in the lost record only,
// and running it under guessed rules would let it take GPUs nobody accounts for.
#include <algorithm>
#include <fmt/format.h>
#include <sys/wait.h>

#include "runtime/daemon/daemon.h"
#include "runtime/daemon/daemon_util.h"

namespace aegis {

namespace {

// The daemon's CUDA_VISIBLE_DEVICES in a launch file (it overrides the user's): the GPUs.
std::vector<std::string> launch_gpus(const LaunchFile& f) {
  std::vector<std::string> out;
  for (const auto& e : f.env) {
    if (!e.starts_with("CUDA_VISIBLE_DEVICES=")) continue;
    std::string_view v = std::string_view(e).substr(21);
    while (!v.empty()) {
      const auto comma = std::min(v.find(','), v.size());
      if (comma > 0) out.emplace_back(v.substr(0, comma));
      v.remove_prefix(std::min(comma + 1, v.size()));
    }
  }
  return out;
}

constexpr const char* kMissing =
    "lost: its record was missing from the database when aegisd started (lost with the database's write-ahead "
    "log?); ";
constexpr const char* kOlder =
    "lost: its record in the database was older than its attempts on disk when aegisd started (lost with the "
    "database's write-ahead log?); ";

// For the log: a start error can quote the user's command, which may hold a line break
// (a forged log line); control characters are shown as '?'.
std::string log_safe(std::string s) {
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

// One attempt found on disk: recorded as it stands, and stopped when it still runs.
Attempt found_attempt(Env& env, JobId id, int n, Seconds now, std::string& what, bool& stopping) {
  Attempt a;
  a.number = n;
  a.launched_at = now;  // not known outside the lost record
  if (const auto f = env.launch_of(id, n)) a.gpu_uuids = launch_gpus(*f);
  const AttemptStatus st = env.attempt_status(id, n);
  a.pgid = st.pgid;
  a.ended_at = now;
  a.outcome = AttemptOutcome::Unknown;
  stopping = false;
  switch (st.state) {
    case AttemptStatus::State::Running:
      if (!env.stop_attempt(id, n)) env.kill_attempt(id, n);  // its shim cannot take a stop yet
      stopping = true;
      a.detail = what = fmt::format("attempt {} was running: stopped", n);
      break;
    case AttemptStatus::State::Ended:
      a.ended_at = st.ended_at;
      a.launched_at = std::min(a.launched_at, st.ended_at);  // its run is not charged (fair share)
      if (WIFEXITED(st.wait_status)) a.exit_code = WEXITSTATUS(st.wait_status);
      if (WIFSIGNALED(st.wait_status)) a.signal = WTERMSIG(st.wait_status);
      a.outcome = !st.start_error.empty() ? AttemptOutcome::FailedStart
                  : a.exit_code == 0      ? AttemptOutcome::Completed
                                          : AttemptOutcome::Failed;
      a.detail = !st.start_error.empty() ? st.start_error
                 : a.exit_code           ? fmt::format("exit status {}", *a.exit_code)
                                         : fmt::format("killed by signal {}", a.signal.value_or(0));
      what = fmt::format("attempt {} had ended ({})", n, a.detail);
      break;
    case AttemptStatus::State::Gone:
      a.outcome = st.started ? AttemptOutcome::Unknown : AttemptOutcome::Lost;
      a.detail = st.started ? "ended without an exit record" : "never started";
      what = fmt::format("attempt {} {}", n, a.detail);
      break;
    case AttemptStatus::State::Unknown:
      a.detail = "its records cannot be read (" + st.why_unknown + ")";
      what = fmt::format("attempt {}: {}", n, a.detail);
      break;
  }
  return a;
}

}  // namespace

void Daemon::account_for_lost_records(Seconds now) {
  if (const auto& w = store_.wal_lost()) {
    stats_.wal_lost = true;
    fmt::print(stderr,
               "aegisd: error: database: its write-ahead log was lost while aegisd was down: {}; the changes since its "
               "last checkpoint are undone: jobs submitted since then that had not started are gone, and those that "
               "ran are stopped and recorded as lost (below)\n",
               *w);
  }
  for (JobId id : env_.jobs_on_disk(first_unknown_id_)) {
    try {
      if (store_.get(id)) continue;
    } catch (const StoreError&) {
      continue;  // set aside (quarantine): its record is there, damaged
    }
    const auto numbers = env_.attempts_on_disk(id);
    std::optional<LaunchFile> launch;
    for (auto it = numbers.rbegin(); it != numbers.rend() && !launch; ++it) launch = env_.launch_of(id, *it);
    DaemonJob j;
    j.id = id;
    std::string what = "no attempt";
    std::vector<std::pair<JobId, int>> stopping;
    for (int n : numbers) {
      bool stop = false;
      j.attempts.push_back(found_attempt(env_, id, n, now, what, stop));
      if (stop) stopping.emplace_back(id, n);
    }
    lost_stopping_.insert(lost_stopping_.end(), stopping.begin(), stopping.end());
    // Without a lost -wal, a job whose attempts all never started is the leftover of a
    // submission whose commit failed (its launch files come first, Daemon::apply): it was
    // refused, not lost.
    if (!store_.wal_lost() && std::ranges::all_of(j.attempts, [](const Attempt& a) {
          return a.outcome == AttemptOutcome::Lost;
        }))
      continue;
    stats_.lost_records++;
    if (!launch || launch->argv.empty()) {
      fmt::print(stderr, "aegisd: error: job {}: lost: no record, and no readable launch file; {}\n", id, log_safe(what));
      continue;
    }
    j.uid = launch->uid;
    j.gid = launch->gid;
    j.user = launch->user;
    j.request.command = launch->argv;
    j.request.workdir = launch->workdir;
    j.request.name = api::default_job_name(launch->argv.front());
    j.request.gpus = std::clamp(static_cast<int>(launch_gpus(*launch).size()), 1, api::kMaxGpus);
    j.submitted_at = now;
    j.started_at = now;
    j.ended_at = now;
    j.state = !j.attempts.empty() && j.attempts.back().outcome == AttemptOutcome::Completed ? JobState::Completed
                                                                                             : JobState::Failed;
    j.reason = kMissing + what;
    j.queue_seq = store_.next_queue_seq();
    fmt::print(stderr, "aegisd: error: job {} of {}: {}\n", id, log_safe(j.user), log_safe(j.reason));
    try {
      Tx tx(store_);
      store_.restore(j);
      store_.event(id, now, "lost", j.reason);
      tx.commit();
    } catch (const StoreError& e) {
      fmt::print(stderr, "aegisd: error: job {}: cannot record it as lost: {}\n", id, e.what());
    }
  }
}

bool Daemon::newer_attempts_on_disk(DaemonJob& rec, Seconds now) {
  const int known = static_cast<int>(rec.attempts.size());
  std::vector<int> newer;
  for (int n : env_.attempts_on_disk(rec.id))
    if (n > known) newer.push_back(n);
  // A launch's files come before its record (Daemon::apply): the leftover of a launch that
  // never started is expected after a crash, and is replaced when the job starts again.
  if (newer.empty() ||
      (newer.size() == 1 && [&] {
        const AttemptStatus st = env_.attempt_status(rec.id, newer.front());
        return st.state == AttemptStatus::State::Gone && !st.started;
      }()))
    return false;
  std::string what;
  // The attempt the record thought running ended without it knowing: as it stands on disk.
  if (Attempt* cur = rec.current(); cur && !cur->ended_at) {
    bool stop = false;
    const Attempt found = found_attempt(env_, rec.id, cur->number, now, what, stop);
    if (stop) lost_stopping_.emplace_back(rec.id, cur->number);
    cur->ended_at = std::max(cur->launched_at, *found.ended_at);
    cur->outcome = found.outcome;
    cur->exit_code = found.exit_code;
    cur->signal = found.signal;
    cur->detail = found.detail;
  }
  for (int n : newer) {
    bool stop = false;
    rec.attempts.push_back(found_attempt(env_, rec.id, n, now, what, stop));
    if (stop) lost_stopping_.emplace_back(rec.id, n);
  }
  stats_.lost_records++;
  rec.state = rec.attempts.back().outcome == AttemptOutcome::Completed ? JobState::Completed : JobState::Failed;
  if (!rec.started_at) rec.started_at = now;
  rec.ended_at = now;
  rec.reason = kOlder + what;
  fmt::print(stderr, "aegisd: error: job {} of {}: {}\n", rec.id, log_safe(rec.user), log_safe(rec.reason));
  try {
    Tx tx(store_);
    store_.update(rec);
    store_.event(rec.id, now, "lost", rec.reason);
    tx.commit();
  } catch (const StoreError& e) {
    fmt::print(stderr, "aegisd: error: job {}: cannot record it as lost: {}\n", rec.id, e.what());
  }
  return true;
}

void Daemon::watch_lost_attempts() {
  // Through attempt_status, which also finishes a stop whose shim was gone (SIGKILL after
  // the grace); an attempt is forgotten once nothing of it runs.
  std::erase_if(lost_stopping_, [&](const std::pair<JobId, int>& k) {
    return env_.attempt_status(k.first, k.second).state != AttemptStatus::State::Running;
  });
}

}  // namespace aegis
