// The files that tie a job attempt to its processes, in the state directory:
//   jobs/<id>/<attempt>/lock        held (flock) by the attempt's shim for its whole life
//   jobs/<id>/<attempt>/child.json  the job's process group, written once it is started
//   jobs/<id>/<attempt>/exit.json   the wait status, written when the job has ended
//   jobs/<id>/<attempt>/stdout, stderr   the job's output, owned by its user, mode 0600
// They outlive the daemon: after a restart they tell which attempts still run and how the
// others ended, so nothing is lost and nothing runs twice.
#pragma once
#include <optional>
#include <string>
#include <sys/types.h>

#include "core/units.h"

namespace aegis {

struct AttemptDir {
  std::string dir;
  std::string lock() const { return dir + "/lock"; }
  std::string child() const { return dir + "/child.json"; }
  std::string exit() const { return dir + "/exit.json"; }
  std::string stdout_log() const { return dir + "/stdout"; }
  std::string stderr_log() const { return dir + "/stderr"; }
};

AttemptDir attempt_dir(const std::string& state_dir, JobId id, int attempt);

// Creates the directories (mode 0700, owned by the daemon's user). Throws std::runtime_error.
void make_attempt_dir(const AttemptDir& d);

// True while the attempt's shim holds its lock (or, before it started, the daemon does).
bool attempt_alive(const AttemptDir& d);

struct ExitRecord {
  int wait_status = 0;
  Seconds ended_at = 0;
  bool cancelled = false;
};
std::optional<ExitRecord> read_exit(const AttemptDir& d);
std::optional<pid_t> read_child_pgid(const AttemptDir& d);

// Writes `text` to `path` atomically (temporary file, fsync, rename).
void write_file_atomic(const std::string& path, const std::string& text);

// The last `max_bytes` of a file ("" if missing).
std::string read_tail(const std::string& path, std::size_t max_bytes);

}  // namespace aegis
