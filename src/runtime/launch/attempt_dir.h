// The files that tie a job attempt to its processes, in the state directory (root, 0700):
//   jobs/<id>/<attempt>/launch      what the shim runs (launch_file.h)
//   jobs/<id>/<attempt>/lock        held (flock) by the attempt's shim for its whole life
//   jobs/<id>/<attempt>/child.json  the job's process group, its shim and cgroup, once started
//   jobs/<id>/<attempt>/exit.json   how it ended, once it has
//   jobs/<id>/<attempt>/stdout, stderr   the job's output, owned by its user, mode 0600
// aegisd creates every one of them, exclusively and without following links, before it
// starts the shim: a new attempt never opens an older attempt's files, and a full disk
// is met before any process exists. child.json and exit.json are records of a fixed size
// (kRecordBytes, JSON padded with spaces) that the shim rewrites in place, so that no new
// disk block is needed to say how a job ended. The files outlive the daemon: after a
// restart they tell which attempts still run and how the others ended.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

#include "core/units.h"
#include "runtime/launch/launch_file.h"
#include "runtime/launch/proc.h"

namespace aegis {

inline constexpr std::size_t kRecordBytes = 512;

struct AttemptDir {
  std::string dir;
  std::string launch() const { return dir + "/launch"; }
  std::string lock() const { return dir + "/lock"; }
  std::string child() const { return dir + "/child.json"; }
  std::string exit() const { return dir + "/exit.json"; }
  std::string stdout_log() const { return dir + "/stdout"; }
  std::string stderr_log() const { return dir + "/stderr"; }
};

AttemptDir attempt_dir(const std::string& state_dir, JobId id, int attempt);

// A failure to prepare or start an attempt, with its errno. Transient ones (a full disk,
// no descriptors or memory left) leave the job queued to try again later; the others end it.
struct LaunchError : std::runtime_error {
  LaunchError(const std::string& what, int err) : std::runtime_error(what), error(err) {}
  int error;
  bool transient() const;
};

// Creates the attempt's directory (it must not exist, except as the leftover of an attempt
// that never started, which is replaced) and all its files: the launch file, the lock,
// the two records (pending) and the logs (owned by the job's user). Throws LaunchError and
// leaves nothing behind.
void prepare_attempt(const AttemptDir& d, const LaunchFile& launch);

// Whether the attempt's shim holds its lock. Unknown when the lock cannot be checked (no
// file descriptor left, I/O error): the caller must not conclude anything then.
enum class Liveness { Alive, Gone, Unknown };
Liveness attempt_liveness(const AttemptDir& d);

// A fixed-size record: still pending, written, or unreadable just now (errno in `error`).
template <class T>
struct Record {
  enum Status { Pending, Written, Unreadable } status = Pending;
  T value{};
  int error = 0;
  bool written() const { return status == Written; }
};

struct ChildRecord {
  pid_t pgid = 0;                // the job's process group and session (its first process)
  ProcessRef shim;               // the attempt's shim
  std::string cgroup_mount, cgroup;  // its cgroup ("" = none: descendants of the shim)
};

struct ExitRecord {
  int wait_status = 0;
  Seconds ended_at = 0;
  bool cancelled = false;        // the shim passed a cancel on to the job
  std::string start_error;       // the job never ran: why (e.g. "cannot run 'x': Argument list too long (E2BIG)")
  std::uint64_t log_dropped_bytes = 0;  // output past log_max_bytes or lost to write errors
};

Record<ChildRecord> read_child(const AttemptDir& d);
Record<ExitRecord> read_exit(const AttemptDir& d);
std::string child_record_text(const ChildRecord& r);
std::string exit_record_text(const ExitRecord& r);

// Rewrites a record in place (no new blocks) and syncs it; false with errno on failure.
bool write_record(const std::string& path, const std::string& json);

// Issue 33 item 6 (what outlives a lost database record): the jobs with an id of at least
// `from` that have a directory in STATE_DIR/jobs/, and the attempts of one job there, both
// ascending. Names that are not plain decimal numbers, and anything not a directory (a
// link), are left out; a directory that cannot be read gives nothing.
std::vector<JobId> job_dirs(const std::string& state_dir, JobId from);
std::vector<int> attempt_numbers(const std::string& state_dir, JobId job);
// The attempt's launch file as aegisd wrote it; nullopt when missing or unreadable.
std::optional<LaunchFile> read_launch(const AttemptDir& d);

// The last `max_bytes` of a file ("" if missing).
std::string read_tail(const std::string& path, std::size_t max_bytes);

}  // namespace aegis
